"""DeleteShareGroupState (key 86), v0: share partitions' state removed at their share
coordinator, a tombstone each (what DeleteShareGroupOffsets asks; inter-broker, Kafka 4).

- CLUSTER_ACTION on the cluster, else GROUP_AUTHORIZATION_FAILED per partition.
- Per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE when
  the state topic's ISR cannot take it.
"""

from __future__ import annotations

import uuid

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode


async def delete_states(services, request, allowed: bool = True) -> dict:
    """The answer to a request (decoded, or the same as plain dicts)."""
    coordinator = services.share_coordinator
    results = []
    for t in request["topics"]:
        topic_id = uuid.UUID(bytes=bytes(t["topic_id"]))
        partitions = []
        for p in t["partitions"]:
            error = (await coordinator.delete((request["group_id"], topic_id, p["partition"]))
                     if allowed else ErrorCode.GROUP_AUTHORIZATION_FAILED)
            partitions.append({"partition": p["partition"], "error_code": error,
                               "error_message": None})
        results.append({"topic_id": bytes(t["topic_id"]), "partitions": partitions})
    return {"results": results}


@register(86)
async def handle(ctx: RequestContext, request) -> dict:
    return await delete_states(ctx.services, request,
                               authorize_cluster(ctx, AclOperation.CLUSTER_ACTION))
