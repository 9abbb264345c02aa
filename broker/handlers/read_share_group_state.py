"""ReadShareGroupState (key 84), v0: a share partition's leader reads the partition's durable
state from its share coordinator when it starts the share partition (inter-broker, Kafka 4).

- CLUSTER_ACTION on the cluster, else GROUP_AUTHORIZATION_FAILED per partition; a state never
  written has start offset -1 (the leader then starts where share.auto.offset.reset says).
- NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS per partition, as Kafka's share coordinator.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from broker.handlers.share_state_requests import per_partition
from protocol.errors import ErrorCode


async def read_states(services, request, allowed: bool = True) -> dict:
    """The answer to a request (decoded, or the same as plain dicts)."""
    coordinator = services.share_coordinator

    async def read(key: tuple, _partition: dict) -> dict:
        error, state = (coordinator.read(key) if allowed
                        else (ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
        return {"error_code": error, "state_epoch": state.state_epoch if state else 0,
                "start_offset": state.start_offset if state else -1,
                "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s,
                                   "delivery_count": c} for f, la, s, c in state.batches]
                if state else []}

    return await per_partition(request, read)


@register(84)
async def handle(ctx: RequestContext, request) -> dict:
    return await read_states(ctx.services, request,
                             authorize_cluster(ctx, AclOperation.CLUSTER_ACTION))
