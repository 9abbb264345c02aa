"""The metadata store on a real Apache ZooKeeper, through kazoo: one broker process, one ZooKeeper
session, as a Kafka broker has.

kazoo is synchronous and runs watches on its own thread; every watch, and every change of the
session, is handed to the event loop (`call_soon_threadsafe`), so the controller and the brokers
see them exactly as they see the embedded store's. Calls block for one round trip to ZooKeeper:
metadata writes are rare (topic changes, ISR changes, elections), never on the produce path.

kazoo over aiozk: kazoo is the client the Python ZooKeeper world maintains (releases every year,
recipes that survive reconnects), and its blocking calls fit the store's synchronous interface,
which the embedded store, the controller and the admin code already share.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import ZnodeStat

from broker.logs import get_logger
from broker.metadata.recipes import ChildrenWatch, DataWatch
from broker.metadata.store import (
    BadVersionError,
    ConnectionLossError,
    MetadataStoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    Stat,
    WatchedEvent,
    Watcher,
    json_bytes,
)

log = get_logger("kafka_sim.zookeeper_store")

_ERRORS: tuple[tuple[type[Exception], type[MetadataStoreError]], ...] = (
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kz.SessionExpiredError, SessionExpiredError),
    (kz.ConnectionLoss, ConnectionLossError),
    (kz.ConnectionClosedError, ConnectionLossError),
    (kz.OperationTimeoutError, ConnectionLossError),
)
SessionListener = Callable[[str], object]  # "LOST" (expired) or "CONNECTED" (a session is live)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except kz.KazooException as exc:
        raise _store_error(exc) from None


def _store_error(exc: Exception) -> MetadataStoreError:
    for theirs, ours in _ERRORS:
        if isinstance(exc, theirs):
            return ours(str(exc) or theirs.__name__)
    return MetadataStoreError(f"{type(exc).__name__}: {exc}")


def _ancestors(path: str) -> list[str]:
    """`/a/b/c` -> [`/a`, `/a/b`]."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _stat(stat: ZnodeStat) -> Stat:
    return Stat(stat.czxid, stat.mzxid, stat.pzxid, stat.version, stat.cversion,
                stat.ephemeralOwner, stat.dataLength, stat.numChildren)


class _LoopWatcher:
    """A one-shot watch (kind, path, callback) whose callback runs on the event loop; `cancelled`
    drops its delivery. kazoo calls it on its own thread; `deliver` is set by the store."""

    __slots__ = ("key", "path", "watch", "cancelled", "deliver", "__weakref__")

    def __init__(self, key: tuple[str, str, Watcher], watch: Watcher) -> None:
        self.key, self.path, self.watch = key, key[1], watch
        self.cancelled = False
        self.deliver: Callable[[_LoopWatcher, WatchedEvent], None] | None = None

    def __call__(self, event: Any) -> None:  # kazoo's thread
        if self.deliver is not None:
            self.deliver(self, WatchedEvent(event.type, event.path or self.path))


class ZooKeeperMetadataStore:
    """The store interface (broker/metadata/store.py) on a ZooKeeper ensemble.

    `connect` is `host:port[,host:port...][/chroot]` (Kafka's `zookeeper.connect`); the chroot is
    created if missing. `start()` connects from inside the event loop that will run the watches.
    """

    def __init__(self, connect: str, *, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int = 18_000) -> None:
        self.connect = connect
        self._client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                   connection_retry={"max_tries": -1, "max_delay": 1.0})
        self._connection_timeout_s = connection_timeout_ms / 1000
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchers: dict[tuple[str, str, Watcher], _LoopWatcher] = {}
        self._session_listeners: list[SessionListener] = []
        self._lost = False
        self._closing = False  # a session we end on purpose is not an expiry

    # --- connection and session ---

    def start(self) -> None:
        """Connect (again, after `close_session`): a new session."""
        if self._loop is None:
            self._client.add_listener(self._on_state)
        self._loop = asyncio.get_running_loop()
        self._closing = False
        hosts, _, chroot = self.connect.partition("/")
        if chroot:  # Kafka creates its chroot on first use too
            self._with_client(hosts, lambda client: client.ensure_path("/" + chroot))
        try:
            self._client.start(timeout=self._connection_timeout_s)
        except Exception as exc:
            self._client.close()
            raise ConnectionLossError(
                f"cannot reach ZooKeeper at {self.connect}: {exc or type(exc).__name__}") from None

    def _with_client(self, hosts: str, job: Callable[[KazooClient], object]) -> None:
        client = KazooClient(hosts=hosts)
        try:
            client.start(timeout=self._connection_timeout_s)
            with _translated():
                job(client)
        except MetadataStoreError:
            raise
        except Exception as exc:
            raise ConnectionLossError(
                f"cannot reach ZooKeeper at {hosts}: {exc or type(exc).__name__}") from None
        finally:
            with contextlib.suppress(Exception):
                client.stop()
            client.close()

    @property
    def session_id(self) -> int:
        """The live session's id; 0 when not connected."""
        client_id = self._client.client_id if self._client.connected else None
        return client_id[0] if client_id else 0

    def create_session(self) -> int:
        """This process's ZooKeeper session (one per broker, as in Kafka)."""
        return self.session_id

    def close_session(self, session_id: int) -> None:
        """End the session: ZooKeeper deletes its ephemeral nodes and tells the watchers."""
        if session_id and session_id == self.session_id:
            self._closing = True
            with contextlib.suppress(Exception):
                self._client.stop()

    def close(self) -> None:
        """End the session and free the client for good."""
        self._closing = True
        with contextlib.suppress(Exception):
            self._client.stop()
        with contextlib.suppress(Exception):
            self._client.close()

    def add_session_listener(self, listener: SessionListener) -> None:
        self._session_listeners.append(listener)

    def _on_state(self, state: str) -> None:  # kazoo's thread
        if self._closing:
            return
        if state == KazooState.LOST:
            self._lost = True
            self._call_soon(self._session_changed, "LOST")
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            self._call_soon(self._session_changed, "CONNECTED")

    def _session_changed(self, state: str) -> None:
        log.warning("ZooKeeper session " + ("expired" if state == "LOST" else "re-established"),
                    connect=self.connect, session=hex(self.session_id))
        if state == "CONNECTED":
            # An expired session took its watches with it: every live watcher re-reads and re-arms.
            for watcher in list(self._watchers.values()):
                self._deliver_now(watcher, WatchedEvent("NONE", watcher.path))
        for listener in list(self._session_listeners):
            try:
                listener(state)
            except Exception:
                log.exception("session listener failed")

    # --- reads (with optional one-shot watches) ---

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        with _translated():
            data, stat = self._client.get(path, watch=self._arm("data", path, watch))
        return data, _stat(stat)

    def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        with _translated():
            stat = self._client.exists(path, watch=self._arm("data", path, watch))
        return _stat(stat) if stat is not None else None

    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        with _translated():
            return sorted(self._client.get_children(path, watch=self._arm("child", path, watch)))

    def get_json(self, path: str, watch: Watcher | None = None) -> tuple[Any, Stat]:
        data, stat = self.get(path, watch)
        return (json.loads(data) if data else None), stat

    # --- writes ---

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               session: int | None = None, sequence: bool = False, makepath: bool = False) -> str:
        if ephemeral and session is not None and session != self.session_id:
            raise SessionExpiredError(f"session {session:#x} is no longer this broker's session")
        with _translated():
            return self._client.create(path, bytes(data), ephemeral=ephemeral, sequence=sequence,
                                       makepath=makepath)

    def create_json(self, path: str, obj: Any, **kwargs: Any) -> str:
        return self.create(path, json_bytes(obj), **kwargs)

    def ensure_path(self, path: str) -> None:
        with _translated():
            self._client.ensure_path(path)

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        with _translated():
            return _stat(self._client.set(path, bytes(data), version=version))

    def set_json(self, path: str, obj: Any, version: int = -1) -> Stat:
        return self.set(path, json_bytes(obj), version)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        with _translated():
            self._client.delete(path, version=version, recursive=recursive)

    # --- batches: pipelined on a worker thread, the event loop free meanwhile ---
    # One blocking call per node costs a round trip each on the loop (~3-5 ms: 10,000 partition
    # states were 30-50 s of stalls). kazoo's *_async calls queue every request on the session's
    # one connection at once; ZooKeeper answers them in order and commits writes in groups.

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        return await asyncio.to_thread(self._get_many, list(paths))

    async def create_many(self, nodes: Sequence[tuple[str, bytes]], *,
                          makepath: bool = False) -> list[MetadataStoreError | None]:
        return await asyncio.to_thread(self._create_many, list(nodes), makepath)

    async def set_many(self, nodes: Sequence[tuple[str, bytes, int]]
                       ) -> list[Stat | MetadataStoreError]:
        return await asyncio.to_thread(self._set_many, list(nodes))

    def _get_many(self, paths: list[str]) -> list[tuple[bytes, Stat] | None]:
        out: list[tuple[bytes, Stat] | None] = []
        for result in [self._client.get_async(path) for path in paths]:
            try:
                data, stat = result.get()
            except kz.NoNodeError:
                out.append(None)
            except kz.KazooException as exc:
                raise _store_error(exc) from None
            else:
                out.append((data, _stat(stat)))
        return out

    def _create_many(self, nodes: list[tuple[str, bytes]],
                     makepath: bool) -> list[MetadataStoreError | None]:
        if makepath:  # the missing ancestors first, one pipelined level at a time
            levels: dict[int, set[str]] = {}
            for path, _ in nodes:
                for ancestor in _ancestors(path):
                    levels.setdefault(ancestor.count("/"), set()).add(ancestor)
            for depth in sorted(levels):
                for error in self._wait_all([self._client.create_async(p, b"")
                                             for p in sorted(levels[depth])]):
                    if error is not None and not isinstance(error, NodeExistsError):
                        raise error
        return self._wait_all([self._client.create_async(path, bytes(data))
                               for path, data in nodes])

    def _set_many(self, nodes: list[tuple[str, bytes, int]]) -> list[Stat | MetadataStoreError]:
        out: list[Stat | MetadataStoreError] = []
        for result in [self._client.set_async(path, bytes(data), version)
                       for path, data, version in nodes]:
            try:
                out.append(_stat(result.get()))
            except kz.KazooException as exc:
                out.append(_store_error(exc))
        return out

    @staticmethod
    def _wait_all(results: list[Any]) -> list[MetadataStoreError | None]:
        out: list[MetadataStoreError | None] = []
        for result in results:
            try:
                result.get()
                out.append(None)
            except kz.KazooException as exc:
                out.append(_store_error(exc))
        return out

    # --- watches ---

    async def flush(self) -> None:
        """Nothing to wait for: ZooKeeper has logged a write to its quorum's disks when the call
        returns."""

    def remove_watch(self, path: str, watch: Watcher) -> None:
        for kind in ("data", "child"):
            watcher = self._watchers.pop((kind, path, watch), None)
            if watcher is not None:
                watcher.cancelled = True  # ZooKeeper may still fire it once; nobody hears it

    def DataWatch(self, path: str, fn: Callable[[bytes | None, Stat | None], object]) -> DataWatch:
        return DataWatch(self, path, fn)

    def ChildrenWatch(self, path: str, fn: Callable[[list[str]], object]) -> ChildrenWatch:
        return ChildrenWatch(self, path, fn)

    def _arm(self, kind: str, path: str, watch: Watcher | None) -> _LoopWatcher | None:
        if watch is None:
            return None
        key = (kind, path, watch)
        watcher = self._watchers.get(key)
        if watcher is None:
            watcher = self._watchers[key] = _LoopWatcher(key, watch)
            watcher.deliver = self._deliver
        return watcher

    def _deliver(self, watcher: _LoopWatcher, event: WatchedEvent) -> None:  # kazoo's thread
        self._call_soon(self._deliver_now, watcher, event)

    def _deliver_now(self, watcher: _LoopWatcher, event: WatchedEvent) -> None:
        if watcher.cancelled:
            return
        # One-shot: it is gone once fired (the callback re-arms through a read if it wants more).
        if self._watchers.get(watcher.key) is watcher:
            del self._watchers[watcher.key]
        watcher.cancelled = True
        try:
            watcher.watch(event)
        except Exception:
            log.exception("metadata watch failed", path=watcher.path)

    def _call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(fn, *args)
