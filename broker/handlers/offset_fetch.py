"""OffsetFetch (key 9), v1-9: a group's committed offsets — the listed partitions, or all of them
(topics null, v2+); v8+ asks for several groups at once.

- A partition without a committed offset answers offset -1, metadata "" and no error.
- v1: a group error is repeated on every partition; v2-7: top-level error_code (no partitions);
  v8+: an error per group. Offsets of an open transaction (TxnOffsetCommit) are not shown; with
  require_stable (v7+) their partitions answer UNSTABLE_OFFSET_COMMIT instead, and the consumer
  retries until the transaction's marker has arrived.
- v9+: a KIP-848 consumer group member's id and epoch are checked (UNKNOWN_MEMBER_ID,
  STALE_MEMBER_EPOCH); a fetch naming no member (an admin's) is not.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, filter_authorized
from protocol.errors import ErrorCode


def _partition(index: int, om, error: ErrorCode = ErrorCode.NONE) -> dict:
    if om is None:
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": error}
    return {"partition_index": index, "committed_offset": om.offset,
            "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata, "error_code": error}


def fetch_group(ctx: RequestContext, group_id: str, topics, require_stable: bool = False,
                member_id: str | None = None, member_epoch: int = -1,
                ) -> tuple[ErrorCode, list[dict]]:
    requested = None if topics is None else [
        (t.name, p) for t in topics for p in t.partition_indexes]
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED  # v0-1 have it per partition only
        return error, [] if ctx.api_version >= 2 else _by_topic(
            (tp[0], _partition(tp[1], None, error)) for tp in requested or ())
    coordinator = ctx.services.group_coordinator
    error, found = coordinator.handle_fetch_offsets(group_id, requested)
    if error == ErrorCode.NONE and (member_id is not None or member_epoch >= 0):
        # v9+: a KIP-848 member fetches as who it is (an admin names no member)
        error = coordinator.validate_consumer_group_commit(
            group_id, member_id or "", member_epoch) or ErrorCode.NONE
    if error != ErrorCode.NONE and ctx.api_version >= 2:
        return error, []
    described = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                  requested if requested is not None else found, lambda tp: tp[0])
    unstable = coordinator.unstable_partitions(group_id) if require_stable and not error else set()
    # All of the group's offsets leave out the topics it may not describe; listed ones say so.
    keys = requested if requested is not None else [tp for tp in sorted(found) if tp[0] in described]
    entries = []
    for topic, partition in keys:
        if topic not in described:
            entry = _partition(partition, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif (topic, partition) in unstable:
            entry = _partition(partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        else:
            entry = _partition(partition, found.get((topic, partition)), error)
        entries.append((topic, entry))
    return error, _by_topic(entries)


def _by_topic(entries) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for topic, entry in entries:
        by_topic.setdefault(topic, []).append(entry)
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


@register(9)
async def handle(ctx: RequestContext, request) -> dict:
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            error, topics = fetch_group(ctx, group.group_id, group.topics,
                                        request.get("require_stable", False),
                                        group.get("member_id"), group.get("member_epoch", -1))
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    error, topics = fetch_group(ctx, request.group_id, request.topics,
                                request.get("require_stable", False))
    return {"throttle_time_ms": 0, "topics": topics, "error_code": error}
