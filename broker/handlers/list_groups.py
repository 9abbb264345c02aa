"""ListGroups (key 16), v0-5: the groups this broker coordinates (clients ask every broker).

- v4+: filter by state (case-insensitive); v5+: by type — every group here is "classic".
- COORDINATOR_LOAD_IN_PROGRESS while an offsets partition is still loading, with what is known.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, authorize_cluster

GROUP_TYPE = "classic"


@register(16)
async def handle(ctx: RequestContext, request) -> dict:
    types = {t.lower() for t in request.get("types_filter", ())}
    error, groups = ctx.services.group_coordinator.handle_list_groups(
        set(request.get("states_filter", ())))
    if types and GROUP_TYPE not in types:
        groups = []
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):  # else only the groups it may describe
        groups = [g for g in groups
                  if authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    return {"throttle_time_ms": 0, "error_code": error, "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type or "",
         "group_state": g.state.value, "group_type": GROUP_TYPE}
        for g in sorted(groups, key=lambda g: g.group_id)]}
