"""ACLs in the metadata store in ZooKeeper-mode Kafka's layout: one node per resource pattern
holding its entries, and a change notification per update so that every broker reloads it.

/kafka-acl/<ResourceType>/<name>                     LITERAL patterns
/kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns
/kafka-acl-changes/acl_changes_<seq>                 "TOPIC:name" (a LITERAL pattern changed)
/kafka-acl-extended-changes/acl_changes_<seq>        {"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}
Node paths name resource types as "Topic", notifications as the enum's name "TOPIC", as Kafka does.
"""

from __future__ import annotations

import contextlib
import json

from broker.authorizer.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    camel_name,
    from_camel_name,
)
from broker.metadata.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    json_bytes,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
# Notifications kept per changes path: a broker that falls further behind rereads every ACL
# (Kafka purges them by age instead, from the ZooKeeper node's ctime, which the store lacks).
NOTIFICATIONS_KEPT = 100
STORED_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER)


def _root(pattern_type: PatternType) -> str:
    return LITERAL_ROOT if pattern_type == PatternType.LITERAL else PREFIXED_ROOT


def resource_path(pattern: ResourcePattern) -> str:
    return f"{_root(pattern.pattern_type)}/{camel_name(pattern.resource_type)}/{pattern.name}"


def encode_entries(entries: frozenset[AccessControlEntry]) -> dict:
    return {"version": 1, "acls": [
        {"principal": e.principal, "permissionType": camel_name(e.permission_type),
         "operation": camel_name(e.operation), "host": e.host}
        for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))]}


def decode_entries(data: dict | None) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    return frozenset(
        AccessControlEntry(acl["principal"], acl["host"], from_camel_name(AclOperation, acl["operation"]),
                           from_camel_name(AclPermissionType, acl["permissionType"]))
        for acl in data.get("acls", []))


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json_bytes({"version": 1, "resourceType": pattern.resource_type.name,
                       "name": pattern.name, "patternType": pattern.pattern_type.name})


def decode_change(changes_path: str, data: bytes) -> ResourcePattern:
    if changes_path == LITERAL_CHANGES:
        kind, _, name = data.decode().partition(":")
        return ResourcePattern(from_camel_name(ResourceType, kind), name, PatternType.LITERAL)
    obj = json.loads(data)
    return ResourcePattern(from_camel_name(ResourceType, obj["resourceType"]), obj["name"],
                           from_camel_name(PatternType, obj["patternType"]))


class AclStore:
    """Reads and conditionally writes the ACL nodes (Kafka's KafkaZkClient ACL calls)."""

    def __init__(self, store: MetadataStore, notifications_kept: int = NOTIFICATIONS_KEPT) -> None:
        self.store = store
        self.notifications_kept = notifications_kept

    async def create_paths(self) -> None:
        for root in (LITERAL_ROOT, PREFIXED_ROOT):
            for resource_type in STORED_TYPES:
                await self.store.ensure_path(f"{root}/{camel_name(resource_type)}")
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            await self.store.ensure_path(path)

    async def read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """The pattern's entries and its node's version (-1: no node)."""
        try:
            data, stat = await self.store.get_json(resource_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return decode_entries(data), stat.version

    async def load_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every pattern's entries: the names listed per type, their nodes read in one batch."""
        patterns = []
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for resource_type in STORED_TYPES:
                try:
                    names = await self.store.get_children(
                        f"{_root(pattern_type)}/{camel_name(resource_type)}")
                except NoNodeError:
                    continue
                patterns += [ResourcePattern(resource_type, name, pattern_type) for name in names]
        out = {}
        read = await self.store.get_many([resource_path(p) for p in patterns])
        for pattern, got in zip(patterns, read, strict=True):
            entries = decode_entries(json.loads(got[0])) if got is not None and got[0] else None
            if entries:
                out[pattern] = entries
        return out

    async def write(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry],
                    version: int) -> bool:
        """Replace the pattern's entries if its node is still at `version`; False if it moved."""
        path = resource_path(pattern)
        try:
            if version < 0:
                if entries:
                    await self.store.create_json(path, encode_entries(entries), makepath=True)
            elif entries:
                await self.store.set_json(path, encode_entries(entries), version=version)
            else:
                await self.store.delete(path, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False
        return True

    async def notify_change(self, pattern: ResourcePattern) -> None:
        changes = LITERAL_CHANGES if pattern.pattern_type == PatternType.LITERAL else EXTENDED_CHANGES
        await self.store.create(f"{changes}/{CHANGE_PREFIX}", encode_change(pattern),
                                sequence=True, makepath=True)
        children = await self.store.get_children(changes)
        if len(children) > self.notifications_kept:
            for child in sorted(children, key=sequence_of)[:-self.notifications_kept]:
                with contextlib.suppress(NoNodeError):  # another broker purged it first
                    await self.store.delete(f"{changes}/{child}")


def sequence_of(child: str) -> int:
    """The sequence number of a notification node (acl_changes_0000000042 -> 42); -1 if not one."""
    suffix = child[len(CHANGE_PREFIX):]
    return int(suffix) if child.startswith(CHANGE_PREFIX) and suffix.isdigit() else -1
