"""OffsetDelete (key 47), v0: delete some committed offsets of a group.

- An Empty group may lose any offset; a consumer group with members only offsets of topics none
  of them subscribes to (else GROUP_SUBSCRIBED_TO_TOPIC per partition); other groups with members
  get NON_EMPTY_GROUP. Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, filter_authorized
from protocol.errors import ErrorCode


@register(47)
async def handle(ctx: RequestContext, request) -> dict:
    cache = ctx.services.metadata_cache
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    requested = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, requested, lambda tp: tp[0])
    errors = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in requested if tp[0] not in readable}
    errors |= {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in requested
               if tp not in errors and cache.partition_state(*tp) is None}
    error, found = await ctx.services.group_coordinator.handle_delete_offsets(
        request.group_id, [tp for tp in requested if tp not in errors])
    if error != ErrorCode.NONE:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    errors.update(found)
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]}
            for p in t.partitions]}
        for t in request.topics]}
