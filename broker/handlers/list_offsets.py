"""ListOffsets (key 2), v0-9: offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

- v0 (consumers of before 0.10.1, e.g. kafka-python api_version (0, 9)) answers its offsets
  before-time form with the one offset found (old_style_offsets; none when max_num_offsets is 0
  or nothing is found).
- Latest is the high watermark (= last stable offset without transactions) for consumers.
- A timestamp with no record at or after it answers offset -1, timestamp -1 (Kafka's "unknown").
- -4 (earliest local) is the log start offset; -5 (latest tiered) is -1: no tiered storage here.
- Per partition, in Kafka's order: TOPIC_AUTHORIZATION_FAILED; INVALID_REQUEST for a partition
  the request lists twice; UNSUPPORTED_VERSION for a negative timestamp the version does not
  know (-3 needs v7, -4 v8, -5 v9); then KAFKA_STORAGE_ERROR (offline dir), NOT_LEADER_OR_FOLLOWER
  or UNKNOWN_TOPIC_OR_PARTITION, then the leader epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH,
  before leadership, as Kafka's localLogWithEpochOrThrow), then NOT_LEADER_OR_FOLLOWER on a
  follower (unless replica_id is -2, the debugging id), then OFFSET_NOT_AVAILABLE while a new
  leader's high watermark is below the start of its epoch.
"""

from __future__ import annotations

from collections import Counter

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, filter_authorized
from protocol.errors import ErrorCode

# Negative timestamps and the first version that may ask for them.
_SPECIAL_TIMESTAMPS = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9}


def _refused(index: int, error: ErrorCode) -> dict:
    return {"partition_index": index, "timestamp": -1, "error_code": error, "offset": -1,
            "leader_epoch": -1, "old_style_offsets": []}


@register(2)
async def handle(ctx: RequestContext, request) -> dict:
    rm = ctx.services.replica_manager
    isolation = request.isolation_level if ctx.api_version >= 2 else 0
    topics = []
    described = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, request.topics,
                                  lambda t: t.name)
    listed = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.name not in described:
                partitions.append(_refused(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if listed[(topic.name, p.partition_index)] > 1:
                partitions.append(_refused(p.partition_index, ErrorCode.INVALID_REQUEST))
                continue
            if p.timestamp < 0 and ctx.api_version < _SPECIAL_TIMESTAMPS.get(p.timestamp, 1 << 15):
                partitions.append(_refused(p.partition_index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            found = await rm.offset_for_timestamp(
                topic.name, p.partition_index, p.timestamp, p.get("current_leader_epoch", -1),
                isolation, request.replica_id,
            )
            partitions.append({
                "partition_index": p.partition_index,
                "error_code": found.error,
                "timestamp": found.timestamp,
                "offset": found.offset,
                "leader_epoch": found.leader_epoch,
                "old_style_offsets": [found.offset] if found.offset >= 0 and p.get(
                    "max_num_offsets", 1) > 0 else [],
            })
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
