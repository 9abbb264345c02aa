"""AlterReplicaLogDirs (key 34), v0-2: move replicas to another of this broker's log dirs (a future
log filled by a copier, then swapped in: broker/replication/replica_alter_log_dirs.py).

- Needs ALTER on the cluster (else every partition CLUSTER_AUTHORIZATION_FAILED).
- Per partition, as Kafka's ReplicaManager.alterReplicaLogDirs: LOG_DIR_NOT_FOUND for a path not in
  log.dirs (absolute paths), KAFKA_STORAGE_ERROR for an offline dir or partition,
  REPLICA_NOT_AVAILABLE when the replica is not hosted here (the dir is kept for when it is), NONE
  once the move has begun (or the replica is there already).
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode


@register(34)
async def handle(ctx: RequestContext, request) -> dict:
    allowed = authorize_cluster(ctx, AclOperation.ALTER)
    movers = ctx.services.replica_manager.alter_log_dirs
    errors: dict[str, dict[int, ErrorCode]] = {}
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                code = movers.alter((topic.name, index), log_dir.path) if allowed \
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                errors.setdefault(topic.name, {})[index] = code
    return {"throttle_time_ms": 0, "results": [
        {"topic_name": name, "partitions": [
            {"partition_index": index, "error_code": code} for index, code in partitions.items()]}
        for name, partitions in errors.items()]}
