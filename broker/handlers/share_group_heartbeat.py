"""ShareGroupHeartbeat (key 76), v1: the KIP-932 share group protocol. A member joins (member
epoch 0) with the topics it subscribes to, heartbeats with its epoch, and leaves (-1); each
answer carries its member epoch and, when it changed, its assignment (topic ids). Several
members may be given one partition: they share its records (see broker/share/).

- With `feature.levels` share.version=0, UNSUPPORTED_VERSION, as a broker without share groups.
- The member id is the consumer's (INVALID_REQUEST when empty), as Kafka 4.1.
- READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each subscribed topic name
  (TOPIC_AUTHORIZATION_FAILED), as Kafka's KafkaApis.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.handlers.consumer_group_heartbeat import heartbeat_error as _error
from protocol.errors import ErrorCode, KafkaError


@register(76)
async def handle(ctx: RequestContext, request) -> dict:
    if ctx.services.config["feature.levels"]["share.version"] < 1:
        return _error(ErrorCode.UNSUPPORTED_VERSION, None)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    topics = request.subscribed_topic_names
    if topics is not None and not all(
            authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in topics):
        return _error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    if not request.group_id:
        return _error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if not request.member_id:
        return _error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if request.member_epoch < -1:
        return _error(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    try:
        answer = await ctx.services.group_coordinator.handle_share_group_heartbeat(
            request.group_id, request.member_id, request.member_epoch, rack_id=request.rack_id,
            subscribed_topics=topics, client_id=ctx.client_id,
            client_host=f"/{ctx.client_host}")
    except KafkaError as exc:
        return _error(exc.code, exc.message)
    assignment = None
    if answer.assignment is not None:
        ids = ctx.services.metadata_cache.topics
        assignment = {"topic_partitions": [
            {"topic_id": ids[t].topic_id.bytes, "partitions": sorted(ps)}
            for t, ps in sorted(answer.assignment.items()) if t in ids and ps]}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "member_id": answer.member_id, "member_epoch": answer.member_epoch,
            "heartbeat_interval_ms": answer.heartbeat_interval_ms, "assignment": assignment}
