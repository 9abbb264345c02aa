"""DeleteRecords (key 21), v0-2: move partitions' log start offsets forward (Kafka's deleteRecords).

- An offset of -1 means the high watermark; one above it, or negative, gets OFFSET_OUT_OF_RANGE.
- The leader moves its own log start offset at once, deleting the segments wholly below it, then
  parks the answer (DelayedDeleteRecords) until every ISR member's log start offset reached it;
  followers follow the leader's log start offset from their Fetch responses and report theirs in
  their Fetch requests. The answer's low_watermark is the smallest log start offset over the ISR.
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, INVALID_TOPIC_EXCEPTION
  (an internal topic), POLICY_VIOLATION (a topic without cleanup.policy=delete), REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, filter_authorized
from broker.replication.delayed_delete_records import DeleteRecordsPartitionStatus
from protocol.errors import ErrorCode


@register(21)
async def handle(ctx: RequestContext, request) -> dict:
    cache = ctx.services.metadata_cache
    offsets: dict[tuple[str, int], int] = {}
    refused: dict[tuple[str, int], DeleteRecordsPartitionStatus] = {}
    deletable = filter_authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, request.topics,
                                  lambda t: t.name)
    for topic in request.topics:
        info = cache.topic(topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if topic.name not in deletable:
                refused[key] = DeleteRecordsPartitionStatus(
                    -1, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED, acks_pending=False)
            elif info is not None and info.internal:
                refused[key] = DeleteRecordsPartitionStatus(
                    -1, error=ErrorCode.INVALID_TOPIC_EXCEPTION, acks_pending=False)
            else:
                offsets[key] = p.offset
    statuses = await ctx.services.replica_manager.delete_records(request.timeout_ms, offsets)
    statuses.update(refused)
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index,
             "low_watermark": statuses[(topic.name, p.partition_index)].low_watermark,
             "error_code": statuses[(topic.name, p.partition_index)].error}
            for p in topic.partitions]}
        for topic in request.topics]}
