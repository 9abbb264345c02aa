"""ConsumerGroupDescribe (key 69), v0: KIP-848 consumer groups as their coordinator keeps them:
state, group and assignment epochs, the assignor, and per member its epoch, subscription, current
assignment and target assignment.

- With `feature.levels` group.version=0, every group answers UNSUPPORTED_VERSION, as a
  ZooKeeper-mode Kafka 3.9 broker.
- A group this coordinator does not have, or a classic group: GROUP_ID_NOT_FOUND, as Kafka
  ("Group g is not a consumer group."); DESCRIBE on the group is needed
  (GROUP_AUTHORIZATION_FAILED); a group another broker coordinates: NOT_COORDINATOR.
"""

from __future__ import annotations

from broker.coordinator.group.consumer_group import Partitions
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode

UNKNOWN_OPERATIONS = -2147483648


def group_error(group_id: str, code: ErrorCode, message: str | None = None) -> dict:
    """A group a consumer or share group describe cannot describe (same fields in both)."""
    return {"error_code": code, "error_message": message, "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
            "members": [], "authorized_operations": UNKNOWN_OPERATIONS}


@register(69)
async def handle(ctx: RequestContext, request) -> dict:
    coordinator = ctx.services.group_coordinator
    topics = ctx.services.metadata_cache.topics

    def assignment(partitions: Partitions) -> dict:
        return {"topic_partitions": [
            {"topic_id": topics[t].topic_id.bytes, "topic_name": t, "partitions": sorted(ps)}
            for t, ps in sorted(partitions.items()) if t in topics and ps]}

    described = []
    if ctx.services.config["feature.levels"]["group.version"] < 1:  # as a ZK-mode Kafka 3.9
        return {"throttle_time_ms": 0, "groups": [
            group_error(g, ErrorCode.UNSUPPORTED_VERSION) for g in request.group_ids]}
    for group_id in request.group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        error = coordinator.validate_group_status(group_id)
        if error is not None:
            described.append(group_error(group_id, error))
            continue
        group = coordinator.consumer_group(group_id)
        if group is None:
            why = (f"Group {group_id} is not a consumer group."
                   if coordinator.group(group_id) is not None else f"Group {group_id} not found.")
            described.append(group_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, why))
            continue
        described.append({
            "error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
            "group_state": group.state, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "assignor_name": group.assignor,
            "members": [{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.subscribed_names),
                "subscribed_topic_regex": (m.subscribed_regex.pattern
                                           if m.subscribed_regex is not None else None),
                "assignment": assignment(m.assigned),
                "target_assignment": assignment(group.target.get(m.member_id, {}))}
                for m in group.members.values()],
            "authorized_operations": UNKNOWN_OPERATIONS})
    return {"throttle_time_ms": 0, "groups": described}
