"""ACLs as Kafka models them: resource patterns, access control entries, bindings and the filters
that CreateAcls, DescribeAcls and DeleteAcls carry, with Kafka's wire codes and ZooKeeper names."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the one name a CLUSTER resource has
E = TypeVar("E", bound=IntEnum)


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def camel_name(member: IntEnum) -> str:
    """The name ZooKeeper's JSON uses: TRANSACTIONAL_ID -> TransactionalId, ALLOW -> Allow."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def from_camel_name(enum: type[E], name: str) -> E:
    for member in enum:
        if camel_name(member).lower() == name.replace("_", "").lower():
            return member
    raise ValueError(f"unknown {enum.__name__} {name!r}")


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
