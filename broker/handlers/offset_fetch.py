"""OffsetFetch (key 9), v1-9: a group's committed offsets — the listed partitions, or all of them
(topics null, v2+); v8+ asks for several groups at once.

- A partition without a committed offset answers offset -1, metadata "" and no error.
- v1: a group error is repeated on every partition; v2-7: top-level error_code (no partitions);
  v8+: an error per group. Offsets of an open transaction (TxnOffsetCommit) are not shown; with
  require_stable (v7+) their partitions answer UNSTABLE_OFFSET_COMMIT instead, and the consumer
  retries until the transaction's marker has arrived.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from protocol.errors import ErrorCode


def _partition(index: int, om, error: ErrorCode = ErrorCode.NONE) -> dict:
    if om is None:
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": error}
    return {"partition_index": index, "committed_offset": om.offset,
            "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata, "error_code": error}


def fetch_group(ctx: RequestContext, group_id: str, topics,
                require_stable: bool = False) -> tuple[ErrorCode, list[dict]]:
    requested = None if topics is None else [
        (t.name, p) for t in topics for p in t.partition_indexes]
    coordinator = ctx.services.group_coordinator
    error, found = coordinator.handle_fetch_offsets(group_id, requested)
    if error != ErrorCode.NONE and ctx.api_version >= 2:
        return error, []
    unstable = coordinator.unstable_partitions(group_id) if require_stable and not error else set()
    by_topic: dict[str, list[dict]] = {}
    keys = requested if requested is not None else sorted(found)
    for topic, partition in keys:
        if (topic, partition) in unstable:
            by_topic.setdefault(topic, []).append(
                _partition(partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT))
            continue
        by_topic.setdefault(topic, []).append(_partition(partition, found.get((topic, partition)), error))
    return error, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


@register(9, "OffsetFetch", 1, 9)
async def handle(ctx: RequestContext, request) -> dict:
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            error, topics = fetch_group(ctx, group.group_id, group.topics,
                                        request.get("require_stable", False))
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    error, topics = fetch_group(ctx, request.group_id, request.topics,
                                request.get("require_stable", False))
    return {"throttle_time_ms": 0, "topics": topics, "error_code": error}
