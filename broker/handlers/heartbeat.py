"""Heartbeat (key 12), v0-4: a member is alive; REBALANCE_IN_PROGRESS tells it to rejoin.

- Resets the member's session (its DelayedHeartbeat). While the coordinator loads the group's
  partition it answers NONE blindly, as Kafka does.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode


@register(12)
async def handle(ctx: RequestContext, request) -> dict:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    error = ctx.services.group_coordinator.handle_heartbeat(
        request.group_id, request.member_id, request.get("group_instance_id"), request.generation_id)
    return {"throttle_time_ms": 0, "error_code": error}
