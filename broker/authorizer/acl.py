"""ACLs as Kafka models them: resource patterns, access control entries, bindings and the filters
that CreateAcls, DescribeAcls and DeleteAcls carry, with Kafka's wire codes and ZooKeeper names."""

from __future__ import annotations

from dataclasses import dataclass

from broker.authorizer.acl_codes import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    camel_name,
    from_camel_name,
)

# The codes live in acl_codes (which handlers import without the bindings); named here too.
__all__ = [
    "AccessControlEntry", "AclBinding", "AclBindingFilter", "AclOperation",
    "AclPermissionType", "CLUSTER_NAME", "IMPLIED_BY", "PatternType", "ResourcePattern",
    "ResourceType", "WILDCARD_HOST", "WILDCARD_PRINCIPAL", "WILDCARD_RESOURCE", "camel_name",
    "from_camel_name", "invalid_binding_reason", "parse_principal"]

# Allowing one of these operations also allows the key (Kafka's implied operations).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "User:alice", or "User:*"
    host: str  # an IP address, or "*"
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def parse_principal(principal: str) -> tuple[str, str]:
    """("User", "alice") from "User:alice"; ValueError as Kafka's SecurityUtils.parseKafkaPrincipal."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"expected a string in format principalType:principalName but got {principal}")
    return kind, name


def invalid_binding_reason(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses a binding (INVALID_REQUEST), or None when it is a valid one."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or \
            pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED) or \
            entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY) or \
            entry.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        return "ACL binding contains unknown or filter-only elements"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    try:
        parse_principal(entry.principal)
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None and ANY match everything, MATCH selects
    the patterns that would apply to the named resource (literal, wildcard and prefixes)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def has_unknown(self) -> bool:
        # UNKNOWN is 0 in all four enums
        return 0 in (self.resource_type, self.pattern_type, self.operation, self.permission_type)

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:  # MATCH
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (self.principal is None or self.principal == entry.principal) \
            and (self.host is None or self.host == entry.host) \
            and self.operation in (AclOperation.ANY, entry.operation) \
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)
