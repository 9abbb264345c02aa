"""ControlledShutdown (key 7), v0-3: a broker about to stop asks the controller to move leadership
of its partitions to other ISR members first, so clients switch leaders before it goes (Kafka's
controlled.shutdown.enable). Only the controller answers (NOT_CONTROLLER elsewhere); the reply
lists the partitions the broker still leads, which it may retry for.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, require_cluster
from protocol.errors import ErrorCode, KafkaError


@register(7)
async def handle(ctx: RequestContext, request) -> dict:
    try:
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
        remaining = await ctx.services.controller_requests.controlled_shutdown(request.broker_id)
    except KafkaError as exc:
        return {"error_code": exc.code, "remaining_partitions": []}
    return {"error_code": ErrorCode.NONE, "remaining_partitions": [
        {"topic_name": t, "partition_index": p} for t, p in remaining]}
