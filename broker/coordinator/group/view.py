"""What `kafka-sim ctl groups` and the console show of a group: state, generation (a KIP-848 or
share group's epoch), protocol, members with their assignments (decoded for the consumer
protocol), committed offsets and lag per partition. A share group's records in flight are kept by
the partitions' leaders (broker/share/view.py); the cluster adds them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.coordinator.group.consumer_group import ConsumerGroup
from broker.coordinator.group.group_metadata import CONSUMER_PROTOCOL_TYPE, GroupMetadata
from broker.coordinator.group.share_group import SIMPLE_ASSIGNOR, ShareGroup
from protocol.group_records import decode_assignment

if TYPE_CHECKING:
    from broker.coordinator.group.coordinator import GroupCoordinator

HighWatermark = Callable[[str, int], int | None]


def _assignment(group: GroupMetadata, raw: bytes) -> dict[str, list[int]] | str:
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return raw.hex()
    decoded = decode_assignment(raw)
    return decoded.partitions if decoded is not None else raw.hex()


def coordinator_views(coordinator: GroupCoordinator, broker_id: int,
                      high_watermark: HighWatermark, group_id: str | None = None) -> list[dict]:
    """The groups a coordinator holds, classic, KIP-848 and share groups (or only `group_id`)."""
    consumer = coordinator.consumer_groups
    views = [group_view(g, broker_id, high_watermark)
             for g in coordinator.manager.groups.values()
             if g.group_id not in consumer and group_id in (None, g.group_id)]
    views += [consumer_group_view(g, coordinator.manager.groups.get(g.group_id), broker_id,
                                  high_watermark,
                                  coordinator.config["group.consumer.session.timeout.ms"])
              for g in consumer.values() if group_id in (None, g.group_id)]
    views += [share_group_view(g, broker_id,
                               coordinator.group_setting(g.group_id, "share.session.timeout.ms"))
              for g in coordinator.share_groups.values() if group_id in (None, g.group_id)]
    return views


def share_group_view(group: ShareGroup, coordinator: int, session_timeout_ms: int) -> dict:
    """A share group in the classic view's shape; its `share_partitions` (the records in flight,
    at each partition's leader) are the cluster's to add."""
    return {
        "group": group.group_id, "coordinator": coordinator, "type": "share",
        "state": group.state, "generation": group.group_epoch,
        "assignment_epoch": group.assignment_epoch, "protocol_type": "share",
        "protocol": SIMPLE_ASSIGNOR, "leader": "",
        "members": [{
            "member_id": m.member_id, "group_instance_id": None, "client_id": m.client_id,
            "client_host": m.client_host, "session_timeout_ms": session_timeout_ms,
            "member_epoch": m.member_epoch,
            "assignment": {t: sorted(ps) for t, ps in sorted(m.assigned.items())},
        } for m in group.members.values()],
        "offsets": [], "share_partitions": [],
    }


def _offsets(group: GroupMetadata | None, high_watermark: HighWatermark) -> list[dict]:
    offsets = []
    for (topic, partition), om in sorted(group.offsets.items() if group is not None else ()):
        hw = high_watermark(topic, partition)
        offsets.append({"topic": topic, "partition": partition, "committed_offset": om.offset,
                        "metadata": om.metadata, "high_watermark": hw,
                        "lag": None if hw is None else max(hw - om.offset, 0)})
    return offsets


def consumer_group_view(group: ConsumerGroup, offsets: GroupMetadata | None, coordinator: int,
                        high_watermark: HighWatermark, session_timeout_ms: int) -> dict:
    """A KIP-848 group in the classic view's shape, with its epochs and each member's target."""
    return {
        "group": group.group_id, "coordinator": coordinator, "type": "consumer",
        "state": group.state, "generation": group.group_epoch,
        "assignment_epoch": group.assignment_epoch, "protocol_type": "consumer",
        "protocol": group.assignor, "leader": "",
        "members": [{
            "member_id": m.member_id, "group_instance_id": m.instance_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "session_timeout_ms": m.classic.session_timeout_ms if m.classic else session_timeout_ms,
            "member_epoch": m.member_epoch,
            # the protocol the member speaks: a classic one in a consumer group (KIP-848's
            # migration) joins with JoinGroup, its epoch its generation
            "member_type": "classic" if m.classic else "consumer",
            "assignment": {t: sorted(ps) for t, ps in sorted(m.assigned.items())},
            "target": {t: sorted(ps)
                       for t, ps in sorted(group.target.get(m.member_id, {}).items())},
        } for m in group.members.values()],
        "offsets": _offsets(offsets, high_watermark),
    }


def group_view(group: GroupMetadata, coordinator: int, high_watermark: HighWatermark) -> dict:
    return {
        "group": group.group_id,
        "coordinator": coordinator,
        "type": "classic",
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
        "offsets": _offsets(group, high_watermark),
    }
