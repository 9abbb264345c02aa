"""ListOffsets (key 2), v1-9: offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

- Latest is the high watermark (= last stable offset without transactions) for consumers.
- A timestamp with no record at or after it answers offset -1, timestamp -1 (Kafka's "unknown").
- -4 (earliest local) is the log start offset; -5 (latest tiered) is -1: no tiered storage here.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register


@register(2, "ListOffsets", 1, 9)
async def handle(ctx: RequestContext, request) -> dict:
    rm = ctx.services.replica_manager
    isolation = request.isolation_level if ctx.api_version >= 2 else 0
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
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
