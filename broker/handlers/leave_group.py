"""LeaveGroup (key 13), v0-5: members leave at once instead of waiting for their sessions to end.

- v0-2: one member id; its error is the top-level error. v3+: a batch of members, each with an
  optional group.instance.id (an empty member id with an instance id removes that static member);
  v5+: a reason per member (logged by Kafka, ignored here).
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode


@register(13)
async def handle(ctx: RequestContext, request) -> dict:
    coordinator = ctx.services.group_coordinator
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "members": []}
    if ctx.api_version < 3:
        error, errors = coordinator.handle_leave_group(request.group_id, [(request.member_id, None)])
        return {"throttle_time_ms": 0, "error_code": error or (errors[0] if errors else ErrorCode.NONE)}
    leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    error, errors = coordinator.handle_leave_group(request.group_id, leaving)
    return {"throttle_time_ms": 0, "error_code": error, "members": [
        {"member_id": m, "group_instance_id": i, "error_code": e}
        for (m, i), e in zip(leaving, errors, strict=False)]}
