"""AlterPartitionReassignments (key 45), v0: move partitions to new replicas (KIP-455), or cancel
a move (null replicas). ALTER on the cluster; answered by the controller once each reassignment
has begun (NOT_CONTROLLER for the whole request elsewhere); per partition
INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS or UNKNOWN_TOPIC_OR_PARTITION as Kafka's
controller decides them (broker/controller/partition_reassignment.py).
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, require_cluster
from protocol.errors import ErrorCode, KafkaError


@register(45)
async def handle(ctx: RequestContext, request) -> dict:
    # A partition listed twice: the last listing wins (Kafka builds a map of the request).
    wanted = {(t.name, p.partition_index): None if p.replicas is None else list(p.replicas)
              for t in request.topics for p in t.partitions}
    try:
        require_cluster(ctx, AclOperation.ALTER)
        outcome = await ctx.services.controller_requests.alter_partition_reassignments(wanted)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message or None,
                "responses": []}
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), error in outcome.items():
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "error_code": ErrorCode.NONE if error is None else error.code,
            "error_message": None if error is None else error.message or None})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": [{"name": t, "partitions": parts} for t, parts in by_topic.items()]}
