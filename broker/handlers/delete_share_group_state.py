"""DeleteShareGroupState (key 86), v0: share partitions' state removed at their share
coordinator, a tombstone each (what DeleteShareGroupOffsets asks; inter-broker, Kafka 4).

- CLUSTER_ACTION on the cluster, else GROUP_AUTHORIZATION_FAILED per partition.
- Per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE when
  the state topic's ISR cannot take it.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from broker.handlers.share_state_requests import per_partition
from protocol.errors import ErrorCode


async def delete_states(services, request, allowed: bool = True) -> dict:
    """The answer to a request (decoded, or the same as plain dicts)."""
    coordinator = services.share_coordinator

    async def delete(key: tuple, _partition: dict) -> dict:
        if not allowed:
            return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        return {"error_code": await coordinator.delete(key)}

    return await per_partition(request, delete)


@register(86)
async def handle(ctx: RequestContext, request) -> dict:
    return await delete_states(ctx.services, request,
                               authorize_cluster(ctx, AclOperation.CLUSTER_ACTION))
