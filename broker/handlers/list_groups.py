"""ListGroups (key 16), v0-5: the groups this broker coordinates (clients ask every broker).

- v4+: filter by state (case-insensitive); v5+: by type, "classic", "consumer" (KIP-848 groups,
  whose protocol type is "consumer" too) or "share" (KIP-932 share groups, protocol type "share").
- COORDINATOR_LOAD_IN_PROGRESS while an offsets partition is still loading, with what is known.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, authorize_cluster


@register(16)
async def handle(ctx: RequestContext, request) -> dict:
    types = {t.lower() for t in request.get("types_filter", ())}
    states = {s.lower() for s in request.get("states_filter", ())}
    coordinator = ctx.services.group_coordinator
    error, groups = coordinator.handle_list_groups(set(request.get("states_filter", ())))
    listed = [] if types and "classic" not in types else [
        (g.group_id, g.protocol_type or "", g.state.value, "classic") for g in groups
        if g.group_id not in coordinator.consumer_groups]  # (their offsets' holder)
    if not types or "consumer" in types:
        listed += [(g.group_id, "consumer", g.state, "consumer")
                   for g in coordinator.consumer_groups.values()
                   if not states or g.state.lower() in states]
    if not types or "share" in types:
        listed += [(g.group_id, "share", g.state, "share")
                   for g in coordinator.share_groups.values()
                   if not states or g.state.lower() in states]
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):  # else only the groups it may describe
        listed = [g for g in listed
                  if authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g[0])]
    return {"throttle_time_ms": 0, "error_code": error, "groups": [
        {"group_id": group_id, "protocol_type": protocol_type, "group_state": state,
         "group_type": group_type}
        for group_id, protocol_type, state, group_type in sorted(listed)]}
