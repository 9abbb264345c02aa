"""DeleteGroups (key 42), v0-2: delete empty groups and their committed offsets.

- A group with members gets NON_EMPTY_GROUP; an unknown one GROUP_ID_NOT_FOUND. Deleting writes
  tombstones for the group and each of its offsets to `__consumer_offsets`.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode


@register(42)
async def handle(ctx: RequestContext, request) -> dict:
    names = list(dict.fromkeys(request.groups_names))
    allowed = [n for n in names if authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, n)]
    errors = {n: ErrorCode.GROUP_AUTHORIZATION_FAILED for n in names}
    errors |= await ctx.services.group_coordinator.handle_delete_groups(allowed)
    return {"throttle_time_ms": 0, "results": [
        {"group_id": name, "error_code": errors[name]} for name in names]}
