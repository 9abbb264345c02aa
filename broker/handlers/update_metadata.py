"""UpdateMetadata (key 6), v0-8: the controller's view of the cluster (live brokers, partition
states, topic ids) replaces this broker's metadata cache (inter-broker; ZooKeeper-mode Kafka).

A controller epoch older than the latest seen gets STALE_CONTROLLER_EPOCH. Topic configs are read
from the metadata store, where the controller's view has them too.
"""

from __future__ import annotations

from broker.controller.wire import metadata_snapshot
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, require_cluster
from protocol.errors import ErrorCode, KafkaError


@register(6, "UpdateMetadata", 0, 8)
async def handle(ctx: RequestContext, request) -> dict:
    target = ctx.services.controller_requests
    try:
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
        target.apply_update_metadata(
            metadata_snapshot(request, ctx.api_version, target.topic_config_overrides,
                              ctx.services.config.inter_broker_listener_name))
    except KafkaError as exc:
        return {"error_code": exc.code}
    return {"error_code": ErrorCode.NONE}
