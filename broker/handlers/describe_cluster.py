"""DescribeCluster (key 60), v0-1: the cluster id, the controller and the live brokers, as a
ZooKeeper-mode Kafka broker answers the Admin client's describeCluster.

- Brokers: the live ones, with their endpoint on the request's listener; the controller id is -1
  when the controller is not among them.
- v1 endpoint_type: 1 (brokers) only; 2 (controllers) is MISMATCHED_ENDPOINT_TYPE, any other
  UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST for either on v0, which cannot name the type).
- Authorized operations when asked for: the bitfield with DESCRIBE on the cluster, 0 without it.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize_cluster,
    authorized_operations,
)
from broker.handlers.metadata import live_brokers
from protocol.errors import ErrorCode

BROKERS, CONTROLLERS = 1, 2  # Kafka's EndpointType ids


def _endpoint_error(ctx: RequestContext, endpoint_type: int) -> dict | None:
    if endpoint_type == BROKERS:
        return None
    if endpoint_type == CONTROLLERS:
        code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
        message = "The request was sent to an endpoint of type BROKER, but we wanted an " \
                  "endpoint of type CONTROLLER"
    else:
        code, message = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, \
            f"Unsupported endpoint type {endpoint_type}"
    return {"throttle_time_ms": 0, "endpoint_type": endpoint_type, "cluster_id": "",
            "controller_id": -1, "brokers": [], "error_message": message,
            "error_code": ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else code,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


@register(60)
async def handle(ctx: RequestContext, request) -> dict:
    endpoint_type = request.get("endpoint_type", BROKERS)
    refused = _endpoint_error(ctx, endpoint_type)
    if refused is not None:
        return refused
    services = ctx.services
    cache = services.metadata_cache
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        operations = (authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
                      if authorize_cluster(ctx, AclOperation.DESCRIBE) else 0)
    brokers = live_brokers(ctx)
    controller = cache.controller_id
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": BROKERS,
        "cluster_id": services.cluster_id,
        "controller_id": controller if controller in brokers else -1,
        "brokers": [{"broker_id": b, "host": h, "port": p, "rack": None}
                    for b, (h, p) in sorted(brokers.items())],
        "cluster_authorized_operations": operations,
    }
