"""AclAuthorizer: decides whether a principal from a host may perform an operation on a resource,
with Kafka's rules (super users; no ACL on a resource -> `allow.everyone.if.no.acl.found`; a
matching DENY wins over any ALLOW; READ/WRITE/DELETE/ALTER imply DESCRIBE and ALTER_CONFIGS
implies DESCRIBE_CONFIGS; ALL matches every operation; "User:*", host "*", the wildcard resource
"*" and PREFIXED patterns). Its cache follows the store's change notifications, as every broker's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from broker.authorizer.acl import (
    IMPLIED_BY,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    invalid_binding_reason,
)
from broker.authorizer.acl_store import (
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    AclStore,
    decode_change,
    sequence_of,
)
from broker.config import BrokerConfig, ConfigError
from broker.logs import get_logger
from broker.metadata.recipes import ChildrenWatch
from broker.metadata.store import MetadataStore, MetadataStoreError, NoNodeError
from protocol.errors import ErrorCode, KafkaError

log = get_logger("kafka_sim.authorizer")

# The values of `authorizer.class.name` that turn this authorizer on (Kafka's ZooKeeper-mode one,
# and the name it had before Kafka 2.4).
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                          "kafka.security.auth.SimpleAclAuthorizer")
MAX_UPDATE_TRIES = 20  # conditional writes lost to other brokers before giving up
YIELD_EVERY = 100  # patterns written between two turns of the other tasks on the loop


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons ("User:admin;User:broker")."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, store: MetadataStore, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.acl_store = AclStore(store)
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._cache: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}  # length -> PREFIXED names
        self._last_change: dict[str, int] = {}  # changes path -> last notification applied
        self._watches: list = []

    @classmethod
    def from_config(cls, config: BrokerConfig, store: MetadataStore) -> AclAuthorizer | None:
        """The authorizer `authorizer.class.name` asks for; None (everything allowed) when empty."""
        name = config["authorizer.class.name"].strip()
        if not name:
            return None
        if name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(f"authorizer.class.name {name!r} is not supported: use "
                             f"{AUTHORIZER_CLASS_NAMES[0]} or leave it empty")
        return cls(store, parse_super_users(config["super.users"]),
                   config["allow.everyone.if.no.acl.found"])

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Watch the change notifications first, then load: no change falls between the two."""
        await self.acl_store.create_paths()
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self._last_change[path] = await self._newest_change(path)
            self._watches.append(await ChildrenWatch(
                self.acl_store.store, path,
                lambda children, path=path: self._on_changes(path, children)).start())
        await self._load_all()

    def close(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()

    async def _newest_change(self, path: str) -> int:
        return max((sequence_of(c) for c in await self.acl_store.store.get_children(path)),
                   default=-1)

    async def _on_changes(self, path: str, children: list[str]) -> None:
        """A burst of notifications is one call (one watch read); each names a pattern, re-read.
        An unreachable store raises out of here: the watch reads again and goes on."""
        last = self._last_change[path]
        numbered = [(sequence_of(c), c) for c in children]
        if numbered and min(numbered)[0] > last + 1:
            # Everything up to our last one was purged: we may have missed changes, reread all.
            await self._load_all()
            self._last_change[path] = max(numbered)[0]
            return
        for seq, child in sorted(n for n in numbered if n[0] > last):
            try:
                data, _ = await self.acl_store.store.get(f"{path}/{child}")
                await self._reload(decode_change(path, data))
            except (NoNodeError, ValueError) as exc:  # purged meanwhile, or not ours to read
                log.warning("ACL change notification skipped", node=f"{path}/{child}", error=str(exc))
            self._last_change[path] = seq

    async def _load_all(self) -> None:
        loaded = await self.acl_store.load_all()
        self._cache = {}
        self._prefix_lengths = {}
        for pattern, entries in loaded.items():
            self._set(pattern, entries)

    async def _reload(self, pattern: ResourcePattern) -> None:
        self._set(pattern, (await self.acl_store.read(pattern))[0])

    def _set(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """Update the cache and the count of PREFIXED names per length, which `authorize` uses
        to look up only the prefixes of a name that some pattern could be."""
        known = pattern in self._cache
        if entries:
            self._cache[pattern] = entries
        else:
            self._cache.pop(pattern, None)
        if pattern.pattern_type != PatternType.PREFIXED or known == bool(entries):
            return
        lengths = self._prefix_lengths.setdefault(pattern.resource_type, {})
        length = len(pattern.name)
        lengths[length] = lengths.get(length, 0) + (1 if entries else -1)
        if not lengths[length]:
            del lengths[length]

    # -- decisions ------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._matching_acls(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if any(_applies(e, principal, host, operation, AclPermissionType.DENY) for e in acls):
            return False
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        return any(_applies(e, principal, host, op, AclPermissionType.ALLOW)
                   for e in acls for op in allowing)

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether the principal may perform the operation on at least one resource of the type
        (Kafka's authorizeByResourceType: InitProducerId without a transactional id, for one)."""
        if principal in self.super_users:
            return True

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            return {p.name for p, entries in self._cache.items()
                    if p.resource_type == resource_type and p.pattern_type == pattern_type
                    and any(_applies(e, principal, host, operation, permission) for e in entries)}

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)

        def denied_by_prefix(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in deny_prefixes)

        if any(not denied_by_prefix(p) for p in names(AclPermissionType.ALLOW, PatternType.PREFIXED)):
            return True
        return any(n == WILDCARD_RESOURCE or (n not in deny_literals and not denied_by_prefix(n))
                   for n in names(AclPermissionType.ALLOW, PatternType.LITERAL))

    def _matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        cache = self._cache
        found: list[AccessControlEntry] = []
        for literal in (name, WILDCARD_RESOURCE):
            found.extend(cache.get(ResourcePattern(resource_type, literal, PatternType.LITERAL), ()))
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                found.extend(cache.get(
                    ResourcePattern(resource_type, name[:length], PatternType.PREFIXED), ()))
        return found

    # -- the ACL APIs ---------------------------------------------------------------------------

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [AclBinding(pattern, entry) for pattern, entries in self._cache.items()
                if acl_filter.matches_pattern(pattern)
                for entry in entries if acl_filter.matches_entry(entry)]

    async def create_acls(self, bindings: list[AclBinding]) -> list[KafkaError | None]:
        """One result per binding: None when stored, INVALID_REQUEST for a binding Kafka refuses."""
        results: list[KafkaError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            reason = invalid_binding_reason(binding) or _unstorable_name(binding.pattern.name)
            if reason:
                results[i] = KafkaError(ErrorCode.INVALID_REQUEST, f"Failed to create ACL: {reason}")
            else:
                by_pattern.setdefault(binding.pattern, []).append(i)
        for n, (pattern, indexes) in enumerate(by_pattern.items(), 1):
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a request with thousands of patterns shares the loop
            new = {bindings[i].entry for i in indexes}
            error = await self._update(pattern, lambda current, new=new: current | new)
            for i in indexes:
                results[i] = error
        return await self._durable(results)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the bindings it deleted (a binding two filters match counts for the first)."""
        deleted: list[list[AclBinding]] = [[] for _ in filters]
        for n, pattern in enumerate(list(self._cache), 1):
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a filter matching thousands of patterns shares the loop
            matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(pattern)]
            if not matching:
                continue
            removed: dict[AccessControlEntry, int] = {}

            def remove(current: frozenset[AccessControlEntry], matching=matching, removed=removed):
                removed.clear()
                for entry in current:
                    for i, acl_filter in matching:
                        if acl_filter.matches_entry(entry):
                            removed.setdefault(entry, i)
                            break
                return current - removed.keys()

            if await self._update(pattern, remove) is None:
                for entry, i in removed.items():
                    deleted[i].append(AclBinding(pattern, entry))
        await self._durable([])
        return deleted

    async def _durable(self, results: list[KafkaError | None]) -> list[KafkaError | None]:
        """The results once the writes are durable; KAFKA_STORAGE_ERROR if the store failed."""
        try:
            await self.acl_store.store.flush()
        except MetadataStoreError as exc:
            if not results:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
            return [r or KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) for r in results]
        return results

    async def _update(self, pattern: ResourcePattern, change) -> KafkaError | None:
        """Apply `change` to the pattern's stored entries with a conditional write (another broker
        may write the same node), notify every broker, update our own cache at once."""
        try:
            for _ in range(MAX_UPDATE_TRIES):
                current, version = await self.acl_store.read(pattern)
                new = frozenset(change(current))
                if new == current:
                    await self._reload(pattern)
                    return None
                if await self.acl_store.write(pattern, new, version):
                    await self.acl_store.notify_change(pattern)
                    await self._reload(pattern)
                    return None
        except MetadataStoreError as exc:  # the store unreachable: this pattern fails alone
            return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to update ACLs: {exc}")
        return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                          f"Failed to update ACLs for {pattern} after {MAX_UPDATE_TRIES} tries")


def _applies(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation,
             permission: AclPermissionType) -> bool:
    return entry.permission_type == permission \
        and entry.principal in (principal, WILDCARD_PRINCIPAL) \
        and entry.operation in (operation, AclOperation.ALL) \
        and entry.host in (host, WILDCARD_HOST)


def _unstorable_name(name: str) -> str | None:
    # The name is a node's name in the store (ZooKeeper's rules): no "/", not "." or "..".
    if "/" in name or name in (".", ".."):
        return f"Invalid resource name {name!r}"
    return None


