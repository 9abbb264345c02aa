"""Kafka's ACL wire codes (resource, pattern, operation and permission types) and the names
ZooKeeper's JSON gives them: all a handler needs to ask the authorizer a question."""

from __future__ import annotations

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
