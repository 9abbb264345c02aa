"""OffsetCommit (key 8), v2-9: store a group's consumed positions in `__consumer_offsets`.

- Members commit with their generation and member id; generation -1 with an empty member id is
  a commit for a group that only keeps offsets (allowed while the group is Empty).
- v2-4 carry a retention time: when not -1 the offset expires that long after the commit
  (stored as an OffsetCommitValue v1 with an expire timestamp, as Kafka does); otherwise
  `offsets.retention.minutes` after the group became empty. v6+: the committed leader epoch;
  v7+: group.instance.id. Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION.
- The answer waits until the offsets partition's ISR has the records (acks=-1).
"""

from __future__ import annotations

from broker.coordinator.group.group_metadata import OffsetAndMetadata
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, filter_authorized
from protocol.errors import ErrorCode


@register(8)
async def handle(ctx: RequestContext, request) -> dict:
    coordinator = ctx.services.group_coordinator
    cache = ctx.services.metadata_cache
    now = coordinator.time_ms()
    retention = request.get("retention_time_ms", -1)
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    group_allowed = authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id)
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, request.topics,
                                 lambda t: t.name) if group_allowed else set()
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not group_allowed:
                errors[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif cache.partition_state(*tp) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in errors:
                continue
            offsets[tp] = OffsetAndMetadata(
                p.committed_offset, p.get("committed_leader_epoch", -1), p.committed_metadata or "",
                now, now + retention if retention >= 0 else None)
    if offsets:
        errors.update(await coordinator.handle_commit_offsets(
            request.group_id, request.member_id, request.get("group_instance_id"),
            request.generation_id_or_member_epoch, offsets))
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": errors[(topic.name, p.partition_index)]}
            for p in topic.partitions]}
        for topic in request.topics]}
