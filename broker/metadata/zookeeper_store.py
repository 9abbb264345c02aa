"""The metadata store on a real Apache ZooKeeper, through kazoo: one broker process, one ZooKeeper
session, as a Kafka broker has.

Every call is one of kazoo's asynchronous requests (queued on the session's connection by its
own thread), its answer handed to the event loop as a future: nothing on the loop waits for
ZooKeeper. Watches, and changes of the session, reach the loop the same way
(`call_soon_threadsafe`), so the controller and the brokers see them exactly as they see the
embedded store's. While the connection is down a call raises ConnectionLossError at once, and one
that gets no answer within the request timeout raises it too: whoever must see a write through
tries again (Kafka's controller waits for the reconnection instead; here the loop goes on serving).

kazoo over aiozk: kazoo is the client the Python ZooKeeper world maintains (releases every year,
a connection thread that survives reconnects and session expiry).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import ZnodeStat

from broker.logs import get_logger
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
    created if missing. `await start()` connects (in a worker thread) from inside the event loop
    that will run the watches and await the answers.
    """

    def __init__(self, connect: str, *, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int = 18_000) -> None:
        self.connect = connect
        self._client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                   connection_retry={"max_tries": -1, "max_delay": 1.0})
        self._connection_timeout_s = connection_timeout_ms / 1000
        # An answer later than this is a lost connection (kazoo notices a dead server after
        # 2/3 of the session timeout; this bounds a request whatever happens).
        self.request_timeout_s = session_timeout_ms / 1000
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchers: dict[tuple[str, str, Watcher], _LoopWatcher] = {}
        self._session_listeners: list[SessionListener] = []
        self._lost = False
        self._closing = False  # a session we end on purpose is not an expiry

    # --- connection and session ---

    async def start(self) -> None:
        """Connect (again, after `close_session`): a new session. kazoo's connect blocks, so it
        runs in a worker thread."""
        if self._loop is None:
            self._client.add_listener(self._on_state)
        self._loop = asyncio.get_running_loop()
        self._closing = False
        await asyncio.to_thread(self._connect)

    def _connect(self) -> None:
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
    def connected(self) -> bool:
        return self._client.connected

    @property
    def session_id(self) -> int:
        """The live session's id; 0 when not connected."""
        client_id = self._client.client_id if self._client.connected else None
        return client_id[0] if client_id else 0

    def create_session(self) -> int:
        """This process's ZooKeeper session (one per broker, as in Kafka)."""
        return self.session_id

    async def close_session(self, session_id: int) -> None:
        """End the session: ZooKeeper deletes its ephemeral nodes and tells the watchers. kazoo's
        stop waits for ZooKeeper's answer (a worker thread waits, at most the request timeout)."""
        if session_id and session_id == self.session_id:
            self._closing = True
            await self._in_thread(self._client.stop)

    async def close(self) -> None:
        """End the session and free the client for good."""
        self._closing = True
        await self._in_thread(self._client.stop)
        with contextlib.suppress(Exception):
            self._client.close()

    async def _in_thread(self, job: Callable[[], object]) -> None:
        """A blocking kazoo call (stop) off the loop, awaited at most the request timeout while
        connected; while ZooKeeper is unreachable it is not awaited at all (the session then
        expires on ZooKeeper's side), so a broker told to stop during an outage exits."""
        connected = self._client.connected
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def run() -> None:  # a daemon thread: the process never waits for it at exit
            with contextlib.suppress(Exception):
                job()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

        threading.Thread(target=run, name="zookeeper-close", daemon=True).start()
        if connected:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done, self.request_timeout_s)

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
        elif state == KazooState.SUSPENDED:
            self._call_soon(log.warning, "ZooKeeper connection lost; reconnecting",
                            connect=self.connect)

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

    # --- requests: kazoo's async calls, answered on the loop ---

    async def _call(self, request: Callable[[], Any]) -> Any:
        """Send one request (`request()` returns kazoo's IAsyncResult) and await its value."""
        (result,) = await self._answers([request])
        if isinstance(result, BaseException):
            raise result
        return result

    async def _answers(self, requests: list[Callable[[], Any]]) -> list[Any]:
        """Send every request, then await the answers: per request its value or its
        MetadataStoreError. No answer within the request timeout raises ConnectionLossError."""
        if not requests:
            return []
        if not self._client.connected:
            raise ConnectionLossError(f"not connected to ZooKeeper at {self.connect}")
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future] = []
        for request in requests:
            future = loop.create_future()
            futures.append(future)
            with _translated():
                request().rawlink(functools.partial(_answered, loop, future))
        try:
            _, pending = await asyncio.wait(futures, timeout=self.request_timeout_s)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        if pending:
            for future in pending:
                future.cancel()
            raise ConnectionLossError(
                f"no answer from ZooKeeper at {self.connect} in {self.request_timeout_s:.0f} s")
        return [f.exception() or f.result() for f in futures]

    # --- reads (with optional one-shot watches) ---

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        armed = self._arm("data", path, watch)
        data, stat = await self._call(lambda: self._client.get_async(path, watch=armed))
        return data, _stat(stat)

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        armed = self._arm("data", path, watch)
        stat = await self._call(lambda: self._client.exists_async(path, watch=armed))
        return _stat(stat) if stat is not None else None

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        armed = self._arm("child", path, watch)
        return sorted(await self._call(
            lambda: self._client.get_children_async(path, watch=armed)))

    async def get_json(self, path: str, watch: Watcher | None = None) -> tuple[Any, Stat]:
        data, stat = await self.get(path, watch)
        return (json.loads(data) if data else None), stat

    # --- writes ---

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     session: int | None = None, sequence: bool = False,
                     makepath: bool = False) -> str:
        if ephemeral and session is not None and session != self.session_id:
            raise SessionExpiredError(f"session {session:#x} is no longer this broker's session")
        if makepath:
            for ancestor in _ancestors(path):
                with contextlib.suppress(NodeExistsError):
                    await self._call(lambda a=ancestor: self._client.create_async(a, b""))
        return await self._call(lambda: self._client.create_async(
            path, bytes(data), ephemeral=ephemeral, sequence=sequence))

    async def create_json(self, path: str, obj: Any, **kwargs: Any) -> str:
        return await self.create(path, json_bytes(obj), **kwargs)

    async def ensure_path(self, path: str) -> None:
        for node in [*_ancestors(path), path]:
            with contextlib.suppress(NodeExistsError):
                await self._call(lambda n=node: self._client.create_async(n, b""))

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        return _stat(await self._call(
            lambda: self._client.set_async(path, bytes(data), version=version)))

    async def set_json(self, path: str, obj: Any, version: int = -1) -> Stat:
        return await self.set(path, json_bytes(obj), version)

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if recursive:
            try:
                children = await self.get_children(path)
            except NoNodeError:
                return
            for child in children:
                with contextlib.suppress(NoNodeError):
                    await self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
        await self._call(lambda: self._client.delete_async(path, version=version))

    # --- batches: every request queued at once on the one connection, the answers awaited ---
    # One request after another costs a round trip each (~3-5 ms: 10,000 partition states would
    # be 30-50 s); ZooKeeper answers pipelined requests in order and commits writes in groups.

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        results = await self._gather([lambda p=p: self._client.get_async(p) for p in paths])
        out: list[tuple[bytes, Stat] | None] = []
        for result in results:
            if isinstance(result, NoNodeError):
                out.append(None)
            elif isinstance(result, MetadataStoreError):
                raise result
            else:
                out.append((result[0], _stat(result[1])))
        return out

    async def create_many(self, nodes: Sequence[tuple[str, bytes]], *,
                          makepath: bool = False) -> list[MetadataStoreError | None]:
        if makepath:  # the missing ancestors first, one pipelined level at a time
            levels: dict[int, set[str]] = {}
            for path, _ in nodes:
                for ancestor in _ancestors(path):
                    levels.setdefault(ancestor.count("/"), set()).add(ancestor)
            for depth in sorted(levels):
                for error in await self._gather([lambda p=p: self._client.create_async(p, b"")
                                                 for p in sorted(levels[depth])]):
                    if isinstance(error, MetadataStoreError) and not isinstance(
                            error, NodeExistsError):
                        raise error
        results = await self._gather([lambda p=p, d=d: self._client.create_async(p, bytes(d))
                                      for p, d in nodes])
        return [r if isinstance(r, MetadataStoreError) else None for r in results]

    async def set_many(self, nodes: Sequence[tuple[str, bytes, int]]
                       ) -> list[Stat | MetadataStoreError]:
        results = await self._gather([
            lambda p=p, d=d, v=v: self._client.set_async(p, bytes(d), version=v)
            for p, d, v in nodes])
        return [r if isinstance(r, MetadataStoreError) else _stat(r) for r in results]

    async def _gather(self, requests: list[Callable[[], Any]]) -> list[Any]:
        """_answers, raising when the connection was lost (rather than one node's error)."""
        results = await self._answers(requests)
        for result in results:
            if isinstance(result, ConnectionLossError | SessionExpiredError):
                raise result
        return results

    # --- watches ---

    async def flush(self) -> None:
        """Nothing to wait for: ZooKeeper has logged a write to its quorum's disks when the call
        returns."""

    def remove_watch(self, path: str, watch: Watcher) -> None:
        for kind in ("data", "child"):
            watcher = self._watchers.pop((kind, path, watch), None)
            if watcher is not None:
                watcher.cancelled = True  # ZooKeeper may still fire it once; nobody hears it

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

    def _call_soon(self, fn: Callable[..., object], *args: Any, **kwargs: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(functools.partial(fn, *args, **kwargs))


def _answered(loop: asyncio.AbstractEventLoop, future: asyncio.Future, result: Any) -> None:
    """kazoo's callback thread: hand the request's value or error to the loop."""
    try:
        value, error = result.get_nowait(), None
    except kz.KazooException as exc:
        value, error = None, _store_error(exc)
    except Exception as exc:
        value, error = None, exc
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(_settle, future, value, error)


def _settle(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():
        return  # given up (timed out, cancelled)
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)
