"""AlterShareGroupOffsets (key 91), v0: set an empty share group's start offset per partition
(what `kafka-share-groups --reset-offsets` sends): each partition's state is set afresh at its
share coordinator (InitializeShareGroupState, a newer state epoch), and its leader starts the
share partition again from there (its writes of the state before are FENCED_STATE_EPOCH).

- READ on the group (GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED);
  the group must be a share group this broker coordinates (NOT_COORDINATOR, GROUP_ID_NOT_FOUND)
  with no member (NON_EMPTY_GROUP), all for each partition; an unknown topic or partition:
  UNKNOWN_TOPIC_OR_PARTITION; a negative offset: INVALID_REQUEST. With share.version=0:
  UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from broker import share
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode, KafkaError


def empty_share_group_refusal(ctx: RequestContext, group_id: str, operation: AclOperation
                              ) -> tuple[ErrorCode, str | None] | None:
    """Why a request about an empty share group's offsets cannot go on, if it cannot."""
    if ctx.services.config["feature.levels"]["share.version"] < 1:
        return ErrorCode.UNSUPPORTED_VERSION, None
    if not authorize(ctx, operation, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    try:
        group = ctx.services.group_coordinator.share_group(group_id)
    except KafkaError as exc:
        return exc.code, exc.message
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, (f"The share group {group_id} has members: its "
                                           "offsets can be changed only when it is empty")
    return None


async def _alter(ctx: RequestContext, group_id: str, topic_id, index: int,
                 start_offset: int) -> tuple[ErrorCode, str | None]:
    if start_offset < 0:
        return ErrorCode.INVALID_REQUEST, f"Invalid start offset {start_offset}"
    persister = ctx.services.share_partition_manager.persister
    kept = await persister.read(group_id, topic_id, index, -1)
    if kept is share.share_state_persister.UNAVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    epoch = kept.state_epoch + 1 if kept is not None else 1
    return await persister.initialize(group_id, topic_id, index, epoch, start_offset), None


@register(91)
async def handle(ctx: RequestContext, request) -> dict:
    refused = empty_share_group_refusal(ctx, request.group_id, AclOperation.READ)
    cache = ctx.services.metadata_cache
    responses = []
    for t in request.topics:
        info = cache.topic(t.topic_name)
        topic_ok = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, t.topic_name)
        partitions = []
        for p in t.partitions:
            if refused is not None:
                error, message = refused
            elif not topic_ok:
                error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
            elif info is None or not 0 <= p.partition_index < info.num_partitions:
                error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
            else:
                error, message = await _alter(ctx, request.group_id, info.topic_id,
                                              p.partition_index, p.start_offset)
            partitions.append({"partition_index": p.partition_index, "error_code": error,
                               "error_message": message})
        responses.append({"topic_name": t.topic_name,
                          "topic_id": info.topic_id.bytes if info else b"\0" * 16,
                          "partitions": partitions})
    return {"throttle_time_ms": 0, "responses": responses}
