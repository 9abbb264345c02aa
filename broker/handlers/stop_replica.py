"""StopReplica (key 5), v0-4: the controller tells this broker to stop replicating partitions and,
for a deleted topic, to delete their logs (inter-broker; ZooKeeper-mode Kafka).

A controller epoch older than the latest seen gets STALE_CONTROLLER_EPOCH for the whole request.
"""

from __future__ import annotations

from broker.controller.wire import stop_replica_partitions
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, require_cluster
from protocol.errors import ErrorCode, KafkaError


@register(5)
async def handle(ctx: RequestContext, request) -> dict:
    keys, delete = stop_replica_partitions(request, ctx.api_version)
    try:
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
        ctx.services.controller_requests.apply_stop_replica(request.controller_epoch, keys,
                                                            delete=delete)
    except KafkaError as exc:
        return {"error_code": exc.code, "partition_errors": []}
    return {"error_code": ErrorCode.NONE, "partition_errors": [
        {"topic_name": t, "partition_index": p, "error_code": ErrorCode.NONE} for t, p in keys]}
