"""WriteShareGroupState (key 85), v0: a share partition's leader writes the partition's state
(start offset, in-flight records with their delivery state and count) to its share coordinator
as records are acknowledged, released or expire (inter-broker, Kafka 4).

- CLUSTER_ACTION on the cluster, else GROUP_AUTHORIZATION_FAILED per partition.
- Per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE when
  the state topic's ISR cannot take it, FENCED_LEADER_EPOCH for a write from an older leader.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from broker.handlers.share_state_requests import per_partition
from protocol.errors import ErrorCode
from protocol.share_records import ShareSnapshot


async def write_states(services, request, allowed: bool = True) -> dict:
    """The answer to a request (decoded, or the same as plain dicts)."""
    coordinator = services.share_coordinator

    async def write(key: tuple, p: dict) -> dict:
        if not allowed:
            return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        batches = tuple((b["first_offset"], b["last_offset"], b["delivery_state"],
                         b["delivery_count"]) for b in p["state_batches"])
        return {"error_code": await coordinator.write(key, ShareSnapshot(
            p["state_epoch"], p["leader_epoch"], p["start_offset"], batches))}

    return await per_partition(request, write)


@register(85)
async def handle(ctx: RequestContext, request) -> dict:
    return await write_states(ctx.services, request,
                              authorize_cluster(ctx, AclOperation.CLUSTER_ACTION))
