"""SyncGroup (key 14), v0-5: the leader hands in the assignment; every member gets its share.

- A member's SyncGroup parks until the leader's assignment is stored in `__consumer_offsets`.
- v5+: protocol type and name are checked against the group's (INCONSISTENT_GROUP_PROTOCOL).
"""

from __future__ import annotations

from broker.coordinator.group.coordinator import await_callback
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode


@register(14)
async def handle(ctx: RequestContext, request) -> dict:
    coordinator = ctx.services.group_coordinator
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "protocol_type": None, "protocol_name": None, "assignment": b""}
    assignment = {a.member_id: bytes(a.assignment) for a in request.assignments}
    result = await await_callback(lambda done: coordinator.handle_sync_group(
        request.group_id, request.generation_id, request.member_id, request.get("protocol_type"),
        request.get("protocol_name"), request.get("group_instance_id"), assignment, done))
    return {"throttle_time_ms": 0, "error_code": result.error,
            "protocol_type": result.protocol_type, "protocol_name": result.protocol_name,
            "assignment": result.assignment}
