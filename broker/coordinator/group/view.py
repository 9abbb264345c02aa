"""What `kafka-sim ctl groups` shows of a group: state, generation, protocol, members with their
assignments (decoded for the consumer protocol), committed offsets and lag per partition."""

from __future__ import annotations

from collections.abc import Callable

from broker.coordinator.group.group_metadata import CONSUMER_PROTOCOL_TYPE, GroupMetadata
from protocol.group_records import decode_assignment


def _assignment(group: GroupMetadata, raw: bytes) -> dict[str, list[int]] | str:
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return raw.hex()
    decoded = decode_assignment(raw)
    return decoded.partitions if decoded is not None else raw.hex()


def group_view(group: GroupMetadata, coordinator: int,
               high_watermark: Callable[[str, int], int | None]) -> dict:
    offsets = []
    for (topic, partition), om in sorted(group.offsets.items()):
        hw = high_watermark(topic, partition)
        offsets.append({"topic": topic, "partition": partition, "committed_offset": om.offset,
                        "metadata": om.metadata, "high_watermark": hw,
                        "lag": None if hw is None else max(hw - om.offset, 0)})
    return {
        "group": group.group_id,
        "coordinator": coordinator,
        "state": group.state.value,
        "generation": group.generation_id,
        "protocol_type": group.protocol_type or "",
        "protocol": group.protocol_name or "",
        "leader": group.leader_id or "",
        "members": [{
            "member_id": m.member_id, "group_instance_id": m.group_instance_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "session_timeout_ms": m.session_timeout_ms,
            "assignment": _assignment(group, m.assignment),
        } for m in group.members.values()],
        "offsets": offsets,
    }
