"""ListOffsets (key 2), v1-9: offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

- Latest is the high watermark (= last stable offset without transactions) for consumers.
- A timestamp with no record at or after it answers offset -1, timestamp -1 (Kafka's "unknown").
- -4 (earliest local) is the log start offset; -5 (latest tiered) is -1: no tiered storage here.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, filter_authorized
from protocol.errors import ErrorCode


@register(2, "ListOffsets", 1, 9)
async def handle(ctx: RequestContext, request) -> dict:
    rm = ctx.services.replica_manager
    isolation = request.isolation_level if ctx.api_version >= 2 else 0
    topics = []
    described = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, request.topics,
                                  lambda t: t.name)
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.name not in described:
                partitions.append({"partition_index": p.partition_index, "timestamp": -1,
                                   "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   "offset": -1, "leader_epoch": -1})
                continue
            found = await rm.offset_for_timestamp(
                topic.name, p.partition_index, p.timestamp, p.get("current_leader_epoch", -1), isolation
            )
            partitions.append({
                "partition_index": p.partition_index,
                "error_code": found.error,
                "timestamp": found.timestamp,
                "offset": found.offset,
                "leader_epoch": found.leader_epoch,
            })
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
