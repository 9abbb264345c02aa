"""ListPartitionReassignments (key 46), v0: the partitions being reassigned (of those listed, or
all with null topics), each with its replicas, adding and removing replicas. DESCRIBE on the
cluster; answered by the controller (NOT_CONTROLLER elsewhere)."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, require_cluster
from protocol.errors import ErrorCode, KafkaError


@register(46)
async def handle(ctx: RequestContext, request) -> dict:
    keys = None if request.topics is None else [
        (t.name, p) for t in request.topics for p in t.partition_indexes]
    try:
        require_cluster(ctx, AclOperation.DESCRIBE)
        found = await ctx.services.controller_requests.list_partition_reassignments(keys)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message or None,
                "topics": []}
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), assignment in sorted(found.items()):
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "replicas": assignment.replicas,
            "adding_replicas": assignment.adding, "removing_replicas": assignment.removing})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()]}
