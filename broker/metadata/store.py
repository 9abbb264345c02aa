"""The metadata store's interface: ZooKeeper's data model (versioned nodes, ephemerals, sequence
nodes, one-shot watches) with kazoo's method names, so the embedded store and a real ZooKeeper
client can stand behind it. Everything above `broker/metadata/` sees only this Protocol.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

# NONE: not a change of the node, but of the session (a new one replaced an expired one: re-read)
EventType = Literal["CREATED", "DELETED", "CHANGED", "CHILD", "NONE"]

# Whoever must see a call through tries it again after this wait, doubled each time up to the
# second figure (seconds): the controller its event, a watch its read, a broker its registration.
RETRY_BACKOFF_S = (0.1, 2.0)


class MetadataStoreError(Exception):
    """Base of the store's errors; the subclass names mirror kazoo.exceptions."""


class NoNodeError(MetadataStoreError):
    pass


class NodeExistsError(MetadataStoreError):
    pass


class BadVersionError(MetadataStoreError):
    pass


class NotEmptyError(MetadataStoreError):
    pass


class NoChildrenForEphemeralsError(MetadataStoreError):
    pass


class SessionExpiredError(MetadataStoreError):
    pass


class ConnectionLossError(MetadataStoreError):
    """The store could not be reached in time (ZooKeeper's ConnectionLoss); the write may or may
    not have happened."""


@dataclass(frozen=True, slots=True)
class Stat:
    """ZooKeeper's Stat of a node: versions and the zxids of its changes."""
    czxid: int  # zxid of the create
    mzxid: int  # zxid of the last create or set
    pzxid: int  # zxid of the last change to the children
    version: int  # number of sets
    cversion: int  # number of child creates and deletes
    ephemeral_owner: int  # session id, or 0 for a persistent node
    data_length: int
    num_children: int


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """What a watcher is told: a node's event type and path, as ZooKeeper's."""
    type: EventType
    path: str


Watcher = Callable[[WatchedEvent], object]



class MetadataStore(Protocol):
    """What the brokers, the controller and the recipes may call (a subset of KazooClient, each
    node call a coroutine: on ZooKeeper it is a network round trip, which never holds the loop).

    A call that cannot reach the store within its request timeout raises ConnectionLossError;
    whoever must see it through (the controller, an ISR change, a registration) tries again."""

    def create_session(self) -> int: ...

    async def close_session(self, session_id: int) -> None: ...

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]: ...

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None: ...

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]: ...

    async def get_json(self, path: str, watch: Watcher | None = None) -> tuple[Any, Stat]: ...

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     session: int | None = None, sequence: bool = False,
                     makepath: bool = False) -> str: ...

    async def create_json(self, path: str, obj: Any, **kwargs: Any) -> str: ...

    async def ensure_path(self, path: str) -> None: ...

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat: ...

    async def set_json(self, path: str, obj: Any, version: int = -1) -> Stat: ...

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None: ...

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Many reads in one go (pipelined on one ZooKeeper connection, as Kafka's controller
        reads partition states): each node's data and stat, None where the node does not exist.
        Other errors raise."""

    async def create_many(self, nodes: Sequence[tuple[str, bytes]], *,
                          makepath: bool = False) -> list[MetadataStoreError | None]:
        """Many persistent creates in one go (pipelined): per node None when created, else the
        error (NodeExistsError when another writer was first). Not atomic."""

    async def set_many(self, nodes: Sequence[tuple[str, bytes, int]]
                       ) -> list[Stat | MetadataStoreError]:
        """Many conditional sets (path, data, version) in one go: per node the new stat, or the
        error (BadVersionError when it changed meanwhile). Not atomic."""

    async def flush(self) -> None:
        """Return once every write made so far survives a crash. Writes are visible to reads at
        once but may reach the disk later: whoever acknowledges a client after a write (topics
        created, configs altered, a producer id block claimed) awaits this first."""

    def remove_watch(self, path: str, watch: Watcher) -> None: ...

    def add_session_listener(self, listener: Callable[[str], object]) -> None:
        """`listener("LOST")` when the session expired (its ephemeral nodes are gone), then
        `listener("CONNECTED")` once a new session is live."""


def json_bytes(obj: Any) -> bytes:
    """A node's data as Kafka writes its JSON znodes: compact, UTF-8."""
    return json.dumps(obj, separators=(",", ":")).encode()
