"""InitializeShareGroupState (key 83), v0: a share partition's state set afresh at its share
coordinator, at a start offset with nothing in flight and a newer state epoch (what
AlterShareGroupOffsets asks of each partition; inter-broker, Kafka 4).

- CLUSTER_ACTION on the cluster, else GROUP_AUTHORIZATION_FAILED per partition.
- Per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE when
  the state topic's ISR cannot take it, FENCED_STATE_EPOCH for a state epoch not above the kept one.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from broker.handlers.share_state_requests import per_partition
from protocol.errors import ErrorCode


async def initialize_states(services, request, allowed: bool = True) -> dict:
    """The answer to a request (decoded, or the same as plain dicts)."""
    coordinator = services.share_coordinator

    async def initialize(key: tuple, p: dict) -> dict:
        if not allowed:
            return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        return {"error_code": await coordinator.initialize(key, p["state_epoch"],
                                                             p["start_offset"])}

    return await per_partition(request, initialize)


@register(83)
async def handle(ctx: RequestContext, request) -> dict:
    return await initialize_states(ctx.services, request,
                                   authorize_cluster(ctx, AclOperation.CLUSTER_ACTION))
