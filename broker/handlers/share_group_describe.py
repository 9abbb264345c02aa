"""ShareGroupDescribe (key 77), v1: KIP-932 share groups as their coordinator keeps them: state,
group and assignment epochs, the assignor (`simple`), and per member its epoch, subscription and
assignment.

- With `feature.levels` share.version=0, every group answers UNSUPPORTED_VERSION.
- A group this coordinator does not have, or one of another kind: GROUP_ID_NOT_FOUND, as Kafka;
  DESCRIBE on the group is needed (GROUP_AUTHORIZATION_FAILED); a group another broker
  coordinates: NOT_COORDINATOR.
"""

from __future__ import annotations

from broker.coordinator.group.share_group import SIMPLE_ASSIGNOR
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.handlers.consumer_group_describe import UNKNOWN_OPERATIONS
from broker.handlers.consumer_group_describe import group_error as _group_error
from protocol.errors import ErrorCode, KafkaError


@register(77)
async def handle(ctx: RequestContext, request) -> dict:
    if ctx.services.config["feature.levels"]["share.version"] < 1:
        return {"throttle_time_ms": 0, "groups": [
            _group_error(g, ErrorCode.UNSUPPORTED_VERSION) for g in request.group_ids]}
    coordinator = ctx.services.group_coordinator
    topics = ctx.services.metadata_cache.topics
    described = []
    for group_id in request.group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(_group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        try:
            group = coordinator.share_group(group_id)
        except KafkaError as exc:
            described.append(_group_error(group_id, exc.code, exc.message))
            continue
        described.append({
            "error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
            "group_state": group.state, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "assignor_name": SIMPLE_ASSIGNOR,
            "members": [{
                "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.subscribed),
                "assignment": {"topic_partitions": [
                    {"topic_id": topics[t].topic_id.bytes, "topic_name": t,
                     "partitions": sorted(ps)}
                    for t, ps in sorted(m.assigned.items()) if t in topics and ps]}}
                for m in group.members.values()],
            "authorized_operations": UNKNOWN_OPERATIONS})
    return {"throttle_time_ms": 0, "groups": described}
