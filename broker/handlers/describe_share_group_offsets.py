"""DescribeShareGroupOffsets (key 90), v0: a share group's start offset per partition, as its
partitions' share coordinators keep it (what `kafka-share-groups --describe` shows).

- DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED for the group) and on each topic
  (TOPIC_AUTHORIZATION_FAILED for its partitions); an unknown topic or partition:
  UNKNOWN_TOPIC_OR_PARTITION. With share.version=0: UNSUPPORTED_VERSION.
- The group must be a share group this broker coordinates (NOT_COORDINATOR, GROUP_ID_NOT_FOUND
  as ShareGroupDescribe). Null topics: the topics its members subscribe to.
- A partition without kept state (never fetched): start offset -1; a share coordinator that
  cannot be reached: COORDINATOR_NOT_AVAILABLE for that partition.
"""

from __future__ import annotations

from broker import share
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.metadata.topic_names import SHARE_STATE_TOPIC
from protocol.errors import ErrorCode, KafkaError


def _group_error(group_id: str, code: ErrorCode, message: str | None = None) -> dict:
    return {"group_id": group_id, "topics": [], "error_code": code, "error_message": message}


async def _describe(ctx: RequestContext, group_id: str, topics) -> dict:
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        group = ctx.services.group_coordinator.share_group(group_id)
    except KafkaError as exc:
        return _group_error(group_id, exc.code, exc.message)
    cache = ctx.services.metadata_cache
    if topics is None:
        wanted = [(t, list(range(cache.topics[t].num_partitions)))
                  for t in sorted(group.subscribed_topics()) if t in cache.topics]
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in topics]
    persister = ctx.services.share_partition_manager.persister
    described = []
    for name, partitions in wanted:
        info = cache.topic(name)
        allowed = authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        rows = []
        for index in partitions:
            row = {"partition_index": index, "start_offset": -1, "leader_epoch": -1,
                   "error_code": ErrorCode.NONE, "error_message": None}
            if not allowed:
                row["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= index < info.num_partitions:
                row["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif cache.topic(SHARE_STATE_TOPIC) is not None:
                state = cache.partition_state(name, index)
                row["leader_epoch"] = state.leader_epoch if state is not None else -1
                kept = await persister.read(group_id, info.topic_id, index, -1)
                if kept is share.share_state_persister.UNAVAILABLE:
                    row["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
                elif kept is not None:
                    row["start_offset"] = kept.start_offset
            rows.append(row)
        described.append({"topic_name": name, "topic_id": info.topic_id.bytes if info else
                          b"\0" * 16, "partitions": rows})
    return {"group_id": group_id, "topics": described, "error_code": ErrorCode.NONE,
            "error_message": None}


@register(90)
async def handle(ctx: RequestContext, request) -> dict:
    if ctx.services.config["feature.levels"]["share.version"] < 1:
        return {"throttle_time_ms": 0, "groups": [
            _group_error(g.group_id, ErrorCode.UNSUPPORTED_VERSION) for g in request.groups]}
    return {"throttle_time_ms": 0, "groups": [
        await _describe(ctx, g.group_id, g.topics) for g in request.groups]}
