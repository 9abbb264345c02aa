"""Kafka's AuthHelper: what a handler asks the authorizer about the request's principal and client
host. With no authorizer configured every question is answered yes after one None check."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from broker.authorizer.acl_codes import CLUSTER_NAME, AclOperation, ResourceType
from broker.handlers import RequestContext
from protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")

# An authorized-operations field's value when the request did not ask for it (the schemas' default).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "CLUSTER_NAME", "AclOperation", "ResourceType", "authorize", "authorize_by_resource_type",
           "authorize_cluster", "authorized_operations", "filter_authorized", "require_cluster"]


def authorize(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
              name: str) -> bool:
    authorizer = ctx.services.authorizer
    return authorizer is None or authorizer.authorize(ctx.principal, ctx.client_host, operation,
                                                      resource_type, name)


def authorize_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def require_cluster(ctx: RequestContext, operation: AclOperation) -> None:
    """CLUSTER_AUTHORIZATION_FAILED for the whole request unless the cluster operation is allowed."""
    if not authorize_cluster(ctx, operation):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def authorize_by_resource_type(ctx: RequestContext, operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    authorizer = ctx.services.authorizer
    return authorizer is None or authorizer.authorize_by_resource_type(
        ctx.principal, ctx.client_host, operation, resource_type)


def filter_authorized(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
                      items: Iterable[T], name: Callable[[T], str] = str) -> set[str]:
    """The names among `items` the principal may perform the operation on (each asked once)."""
    names = {name(item) for item in items}
    if ctx.services.authorizer is None:
        return names
    return {n for n in names if authorize(ctx, operation, resource_type, n)}


# The operations Kafka reports in authorized-operations bitfields, per resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE),
}


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """Kafka's authorized-operations bitfield (bit n: the operation with code n is allowed)."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if authorize(ctx, operation, resource_type, name):
            bits |= 1 << operation
    return bits
