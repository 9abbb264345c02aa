"""DeleteShareGroupOffsets (key 92), v0: an empty share group forgets topics: the state of each
of their partitions is removed at its share coordinator (DeleteShareGroupState), so the group
reads them again from where share.auto.offset.reset says.

- DELETE on the group (GROUP_AUTHORIZATION_FAILED), the group a share group this broker
  coordinates (NOT_COORDINATOR, GROUP_ID_NOT_FOUND) with no member (NON_EMPTY_GROUP): the
  request's error. Per topic: READ on it (TOPIC_AUTHORIZATION_FAILED), UNKNOWN_TOPIC_OR_PARTITION
  for one that does not exist, a share coordinator's error for its partitions.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.alter_share_group_offsets import empty_share_group_refusal
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode


@register(92)
async def handle(ctx: RequestContext, request) -> dict:
    refused = empty_share_group_refusal(ctx, request.group_id, AclOperation.DELETE)
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1],
                "responses": []}
    cache = ctx.services.metadata_cache
    responses = []
    for t in request.topics:
        info = cache.topic(t.topic_name)
        error = ErrorCode.NONE
        if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, t.topic_name):
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            error = await ctx.services.share_partition_manager.persister.delete_topic(
                request.group_id, t.topic_name, range(info.num_partitions))
        responses.append({"topic_name": t.topic_name,
                          "topic_id": info.topic_id.bytes if info else b"\0" * 16,
                          "error_code": error, "error_message": None})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": responses}
