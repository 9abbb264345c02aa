"""What CreateAcls, DescribeAcls and DeleteAcls carry, as the authorizer's bindings and filters
(a code Kafka does not know becomes UNKNOWN, which the authorizer refuses)."""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from broker.authorizer.acl import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
from broker.authorizer.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType

E = TypeVar("E", bound=IntEnum)
NO_AUTHORIZER = "No Authorizer is configured on the broker"
V0_PATTERN_TYPE = PatternType.LITERAL  # v0 has no pattern type: Kafka 1.x knew literal names only


def _code(enum: type[E], value: int) -> E:
    try:
        return enum(value)
    except ValueError:
        return enum(0)  # UNKNOWN


def binding_of(creation) -> AclBinding:
    return AclBinding(
        ResourcePattern(_code(ResourceType, creation.resource_type), creation.resource_name,
                        _code(PatternType, creation.get("resource_pattern_type", V0_PATTERN_TYPE))),
        AccessControlEntry(creation.principal, creation.host, _code(AclOperation, creation.operation),
                           _code(AclPermissionType, creation.permission_type)))


def filter_of(request) -> AclBindingFilter:
    return AclBindingFilter(
        _code(ResourceType, request.resource_type_filter), request.resource_name_filter,
        _code(PatternType, request.get("pattern_type_filter", V0_PATTERN_TYPE)),
        request.principal_filter,
        request.host_filter, _code(AclOperation, request.operation),
        _code(AclPermissionType, request.permission_type))


def binding_fields(binding: AclBinding) -> dict:
    """A binding in DeleteAcls' matching_acls layout."""
    return {"resource_type": binding.pattern.resource_type,
            "resource_name": binding.pattern.name,
            "pattern_type": binding.pattern.pattern_type,
            "principal": binding.entry.principal,
            "host": binding.entry.host,
            "operation": binding.entry.operation,
            "permission_type": binding.entry.permission_type}
