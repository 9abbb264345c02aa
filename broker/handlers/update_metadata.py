"""UpdateMetadata (key 6), v0-8: the controller's view of the cluster (live brokers, partition
states, topic ids) replaces this broker's metadata cache (inter-broker; ZooKeeper-mode Kafka).

A controller epoch older than the latest seen gets STALE_CONTROLLER_EPOCH. Topic configs are not
on the wire: they come from the broker's topic config cache (read from the metadata store once
per topic, then kept current by /config/changes notifications), not from a read per request.
"""

from __future__ import annotations

from broker.controller.wire import metadata_snapshot, update_metadata_topics
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, require_cluster
from protocol.errors import ErrorCode, KafkaError


@register(6)
async def handle(ctx: RequestContext, request) -> dict:
    target = ctx.services.controller_requests
    try:
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
        overrides = await target.topic_config_overrides(
            update_metadata_topics(request, ctx.api_version))
        target.apply_update_metadata(
            metadata_snapshot(request, ctx.api_version, overrides,
                              ctx.services.config.inter_broker_listener_name))
    except KafkaError as exc:
        return {"error_code": exc.code}
    return {"error_code": ErrorCode.NONE}
