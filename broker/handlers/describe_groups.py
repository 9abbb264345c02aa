"""DescribeGroups (key 15), v0-5: state, protocol and members of groups this broker coordinates.

- Member metadata and assignments are shown only for a Stable group (Kafka's summary); an
  unknown group, or a KIP-848 one (ConsumerGroupDescribe's), is described as Dead with no
  members, as Kafka's group coordinator does. v3+: authorized operations are omitted.
"""

from __future__ import annotations

from broker.coordinator.group.group_metadata import GroupState
from broker.handlers import RequestContext, register
from broker.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
    authorize,
    authorized_operations,
)
from protocol.errors import ErrorCode


def describe(ctx: RequestContext, group_id: str, operations: bool = False) -> dict:
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error, group = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    else:
        error, group = ctx.services.group_coordinator.handle_describe_group(group_id)
    entry = {"error_code": error, "group_id": group_id, "group_state": "", "protocol_type": "",
             "protocol_data": "", "members": [],
             "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    if operations and error != ErrorCode.GROUP_AUTHORIZATION_FAILED:
        entry["authorized_operations"] = authorized_operations(ctx, ResourceType.GROUP, group_id)
    if error != ErrorCode.NONE:
        return entry
    if group is None:
        return {**entry, "group_state": GroupState.DEAD.value}
    stable = group.is_(GroupState.STABLE)
    return {**entry, "group_state": group.state.value, "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            } for m in group.members.values()]}


@register(15)
async def handle(ctx: RequestContext, request) -> dict:
    operations = request.get("include_authorized_operations", False)
    return {"throttle_time_ms": 0, "groups": [describe(ctx, g, operations) for g in request.groups]}
