"""WriteShareGroupState (key 85), v0: a share partition's leader writes the partition's state
(start offset, in-flight records with their delivery state and count) to its share coordinator
as records are acknowledged, released or expire (inter-broker, Kafka 4).

- CLUSTER_ACTION on the cluster, else GROUP_AUTHORIZATION_FAILED per partition.
- Per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE when
  the state topic's ISR cannot take it, FENCED_LEADER_EPOCH for a write from an older leader.
"""

from __future__ import annotations

import uuid

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode
from protocol.share_records import ShareSnapshot


async def write_states(services, request, allowed: bool = True) -> dict:
    """The answer to a request (decoded, or the same as plain dicts)."""
    coordinator = services.share_coordinator
    results = []
    for t in request["topics"]:
        topic_id = uuid.UUID(bytes=bytes(t["topic_id"]))
        partitions = []
        for p in t["partitions"]:
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
            if allowed:
                snapshot = ShareSnapshot(p["state_epoch"], p["leader_epoch"], p["start_offset"],
                                         tuple((b["first_offset"], b["last_offset"],
                                                b["delivery_state"], b["delivery_count"])
                                               for b in p["state_batches"]))
                error = await coordinator.write((request["group_id"], topic_id, p["partition"]),
                                                snapshot)
            partitions.append({"partition": p["partition"], "error_code": error,
                               "error_message": None})
        results.append({"topic_id": bytes(t["topic_id"]), "partitions": partitions})
    return {"results": results}


@register(85)
async def handle(ctx: RequestContext, request) -> dict:
    return await write_states(ctx.services, request,
                              authorize_cluster(ctx, AclOperation.CLUSTER_ACTION))
