"""DeleteGroups (key 42), v0-2: delete empty groups and their committed offsets.

- A group with members gets NON_EMPTY_GROUP; an unknown one GROUP_ID_NOT_FOUND. Deleting writes
  tombstones for the group and each of its offsets to `__consumer_offsets`.
- A share group's share state goes first, at the share coordinators of the partitions it was
  ever given (ShareGroupStatePartitionMetadata); their error, if any, is the group's, and the
  group stays.
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
    coordinator = ctx.services.group_coordinator
    for name in list(allowed):
        for topic, partitions in (coordinator.share_state_partitions(name) or {}).items():
            error = await ctx.services.share_partition_manager.persister.delete_topic(
                name, topic, sorted(partitions))
            if error != ErrorCode.NONE:
                errors[name] = error
                allowed.remove(name)
                break
    errors |= await coordinator.handle_delete_groups(allowed)
    return {"throttle_time_ms": 0, "results": [
        {"group_id": name, "error_code": errors[name]} for name in names]}
