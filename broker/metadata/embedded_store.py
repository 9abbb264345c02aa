"""Cluster metadata in a tree of versioned nodes with ZooKeeper's semantics (ephemerals, sequence
nodes, conditional writes, one-shot watches); its method names follow kazoo's KazooClient.

Invariants: every write is one transaction with one zxid; it is validated before anything changes,
handed to the journal writer (the persistent nodes it changed, one record) and only then are the
watches it triggered fired, each watch popped before any callback runs, so a callback that re-arms
sees the next change, not this one. Reads see a write at once; `await flush()` waits until every
write so far is fsynced (what a caller awaits before acknowledging a client).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from broker.logs import get_logger
from broker.metadata.journal_writer import MIN_ROLL_BYTES, JournalWriter
from broker.metadata.store import (
    BadVersionError,
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
from storage.checkpoint import fsync_dir
from storage.metadata_image import (
    JOURNAL,
    SNAPSHOT,
    CorruptMetadataError,
    MetadataImage,
    MetadataTxn,
    PersistedNode,
    load_image,
    read_legacy_store,
    write_snapshot,
)

log = get_logger("kafka_sim.metadata_store")

WriteOp = Callable[[int, list[WatchedEvent]], Any]  # (zxid, events) -> result; see _write


@dataclass(slots=True)
class _Node:
    """A node of the in-memory tree: its data and its Stat's fields."""
    data: bytes
    czxid: int
    mzxid: int
    pzxid: int
    version: int = 0
    cversion: int = 0
    ephemeral_owner: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        return Stat(self.czxid, self.mzxid, self.pzxid, self.version, self.cversion,
                    self.ephemeral_owner, len(self.data), len(self.children))

    def copy(self) -> _Node:
        return replace(self, children=set(self.children))


def _validate(path: str) -> str:
    parts = path.split("/")
    if path == "/" or (path.startswith("/") and all(p not in ("", ".", "..") for p in parts[1:])):
        return path
    raise ValueError(f"invalid node path {path!r}")


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _join(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name


def _decode(data: bytes) -> Any:
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return {"hex": data.hex()}
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


class EmbeddedMetadataStore:
    """The tree, its sessions and watches; persistent nodes kept in the folder `path` when given
    (storage/metadata_image.py: a snapshot and a journal), written by one thread off the loop.

    `legacy_file`, a format-1 store (one JSON document), is converted into `path` and removed.
    """

    def __init__(self, path: Path | None = None, *, legacy_file: Path | None = None,
                 min_roll_bytes: int = MIN_ROLL_BYTES) -> None:
        self.path = Path(path) if path is not None else None
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0)}
        self._zxid = 0
        self._last_session = 0
        self._sessions: dict[int, set[str]] = {}  # live session -> its ephemeral paths
        self._data_watches: dict[str, dict[Watcher, int]] = {}  # watcher -> registration seq
        self._child_watches: dict[str, dict[Watcher, int]] = {}
        self._watch_seq = 0
        self._dirty: set[str] = set()  # persistent paths the transaction being applied changed
        # What the writer thread has made durable; the lock guards these and the waiters.
        self._lock = threading.Lock()
        self._submitted = self._durable = 0
        self._write_error: BaseException | None = None
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._writer: JournalWriter | None = None
        self._closed = False
        if self.path is not None:
            self._open(self.path, legacy_file, min_roll_bytes)

    # --- sessions ---

    def create_session(self) -> int:
        self._check_open()
        self._last_session += 1
        self._sessions[self._last_session] = set()
        self._journal(MetadataTxn(self._zxid, self._last_session))
        return self._last_session

    async def close_session(self, session_id: int) -> None:
        """End a session, deleting its ephemeral nodes; closing an unknown session does nothing."""
        paths = self._sessions.pop(session_id, None)
        if paths:
            self._write(*(partial(self._delete_one, path) for path in sorted(paths)))

    # --- reads (with optional one-shot watches): coroutines, as the store's interface asks,
    # answered at once from the tree ---

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        node = self._node(path)
        self._arm(self._data_watches, path, watch)
        return node.data, node.stat()

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        """The node's stat or None; the watch is armed either way (and fires on CREATED too)."""
        node = self._nodes.get(_validate(path))
        self._arm(self._data_watches, path, watch)
        return node.stat() if node is not None else None

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        node = self._node(path)
        self._arm(self._child_watches, path, watch)
        return sorted(node.children)

    async def get_json(self, path: str, watch: Watcher | None = None) -> tuple[Any, Stat]:
        """The data parsed as JSON (None for empty data) and the stat."""
        data, stat = await self.get(path, watch)
        return (json.loads(data) if data else None), stat

    # --- writes ---

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     session: int | None = None, sequence: bool = False,
                     makepath: bool = False) -> str:
        """Create a node and return its actual path (with the suffix when `sequence`)."""
        return self._create_now(path, data, ephemeral=ephemeral, session=session,
                                sequence=sequence, makepath=makepath)

    def _create_now(self, path: str, data: bytes = b"", **kwargs: Any) -> str:
        return self._write(partial(self._create, path, data, kwargs.get("ephemeral", False),
                                   kwargs.get("session"), kwargs.get("sequence", False),
                                   kwargs.get("makepath", False)))[0]

    async def create_json(self, path: str, obj: Any, **kwargs: Any) -> str:
        return self._create_now(path, json_bytes(obj), **kwargs)

    async def ensure_path(self, path: str) -> None:
        """Create `path` and its missing ancestors as empty persistent nodes."""
        if self._nodes.get(_validate(path)) is None:
            self._create_now(path, makepath=True)

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace the data; with `version` != -1 only if the node is still at that version."""
        return self._write(partial(self._set, path, data, version))[0]

    async def set_json(self, path: str, obj: Any, version: int = -1) -> Stat:
        return self._write(partial(self._set, path, json_bytes(obj), version))[0]

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        self._write(partial(self._delete, path, version, recursive))

    # --- batches: answered at once (the tree is in memory; the journal is written off the loop) ---

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        out: list[tuple[bytes, Stat] | None] = []
        for path in paths:
            node = self._nodes.get(_validate(path))
            out.append((node.data, node.stat()) if node is not None else None)
        return out

    async def create_many(self, nodes: Sequence[tuple[str, bytes]], *,
                          makepath: bool = False) -> list[MetadataStoreError | None]:
        out: list[MetadataStoreError | None] = []
        for path, data in nodes:
            try:
                self._create_now(path, data, makepath=makepath)
                out.append(None)
            except MetadataStoreError as exc:
                out.append(exc)
        return out

    async def set_many(self, nodes: Sequence[tuple[str, bytes, int]]
                       ) -> list[Stat | MetadataStoreError]:
        out: list[Stat | MetadataStoreError] = []
        for path, data, version in nodes:
            try:
                out.append(self._write(partial(self._set, path, data, version))[0])
            except MetadataStoreError as exc:
                out.append(exc)
        return out

    # --- durability ---

    async def flush(self) -> None:
        """Wait until every write made so far is fsynced in the journal (at once without a path).
        Raises MetadataStoreError when the journal could not be written."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._write_error is not None:
                raise _journal_failed(self._write_error)
            if self._durable >= self._submitted:
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((self._submitted, loop, future))
        await future

    def close(self) -> None:
        """Write everything queued and stop the writer thread; later writes raise."""
        self._closed = True
        if self._writer is not None:
            self._writer.close()

    def _on_durable(self, seq: int, error: BaseException | None) -> None:
        """From the writer thread: records up to `seq` are fsynced (or `error` stopped it)."""
        with self._lock:
            self._durable, self._write_error = seq, error
            ready = [w for w in self._waiters if w[0] <= seq or error is not None]
            self._waiters = [w for w in self._waiters if w[0] > seq and error is None]
        for _, loop, future in ready:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_resolve, future, error)

    # --- multi-op transactions ---

    def transaction(self) -> Transaction:
        return Transaction(self)

    def add_session_listener(self, listener: Callable[[str], object]) -> None:
        """Embedded sessions end only when closed, never by expiry: nothing to tell."""

    def remove_watch(self, path: str, watch: Watcher) -> None:
        """Disarm a one-shot watch registered on `path` by get, exists or get_children."""
        for table in (self._data_watches, self._child_watches):
            watchers = table.get(path, {})
            watchers.pop(watch, None)
            if not watchers:
                table.pop(path, None)

    # --- admin view ---

    def dump(self, path: str = "/") -> dict[str, Any]:
        """The subtree at `path`: data decoded (JSON, else UTF-8, else hex), stat, children."""
        node = self._node(path)
        return {
            "data": _decode(node.data),
            "stat": asdict(node.stat()),
            "children": {n: self.dump(_join(path, n)) for n in sorted(node.children)},
        }

    # --- the primitives: validate everything first, then mutate and record events ---

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(_validate(path))
        if node is None:
            raise NoNodeError(path)
        return node

    def _create(self, path: str, data: bytes, ephemeral: bool, session: int | None,
                sequence: bool, makepath: bool, zxid: int, events: list[WatchedEvent]) -> str:
        _check_bytes(data)
        if ephemeral and session is None:
            raise ValueError("an ephemeral node needs a session")
        if not ephemeral and session is not None:
            raise ValueError("only ephemeral nodes belong to a session")
        if ephemeral and session not in self._sessions:
            raise SessionExpiredError(f"session {session} is not live")
        parent_path = _parent(path if sequence else _validate(path))
        missing = self._check_ancestors(_validate(parent_path), makepath)
        parent = self._nodes.get(parent_path)
        if sequence:
            path = _validate(f"{path}{parent.cversion if parent else 0:010d}")
        if path in self._nodes:
            raise NodeExistsError(path)
        for ancestor in missing:
            self._add(ancestor, b"", 0, zxid, events)
        self._add(path, data, session if ephemeral else 0, zxid, events)
        return path

    def _check_ancestors(self, path: str, makepath: bool) -> list[str]:
        """The missing ancestors of a new node, shallowest first (NoNode unless makepath)."""
        missing = []
        while path not in self._nodes:
            if not makepath:
                raise NoNodeError(path)
            missing.append(path)
            path = _parent(path)
        if self._nodes[path].ephemeral_owner:
            raise NoChildrenForEphemeralsError(path)
        return missing[::-1]

    def _add(self, path: str, data: bytes, owner: int, zxid: int,
             events: list[WatchedEvent]) -> None:
        self._nodes[path] = _Node(data, zxid, zxid, zxid, ephemeral_owner=owner)
        if owner:
            self._sessions[owner].add(path)
        else:
            self._dirty.add(path)
        self._link(path, True, zxid, events)

    def _set(self, path: str, data: bytes, version: int, zxid: int,
             events: list[WatchedEvent]) -> Stat:
        _check_bytes(data)
        node = self._check_version(path, version)
        node.data, node.version, node.mzxid = data, node.version + 1, zxid
        if not node.ephemeral_owner:
            self._dirty.add(path)
        events.append(WatchedEvent("CHANGED", path))
        return node.stat()

    def _check_version(self, path: str, version: int) -> _Node:
        node = self._node(path)
        if version != -1 and version != node.version:
            raise BadVersionError(f"{path}: expected version {version}, at {node.version}")
        return node

    def _delete(self, path: str, version: int, recursive: bool, zxid: int,
                events: list[WatchedEvent]) -> None:
        if _validate(path) == "/":
            raise ValueError("the root node cannot be deleted")
        node = self._check_version(path, version)
        if node.children and not recursive:
            raise NotEmptyError(path)
        self._delete_tree(path, zxid, events)

    def _delete_tree(self, path: str, zxid: int, events: list[WatchedEvent]) -> None:
        for name in sorted(self._nodes[path].children):
            self._delete_tree(_join(path, name), zxid, events)
        self._delete_one(path, zxid, events)

    def _delete_one(self, path: str, zxid: int, events: list[WatchedEvent]) -> None:
        node = self._nodes.pop(path)
        if node.ephemeral_owner:
            self._sessions.get(node.ephemeral_owner, set()).discard(path)
        else:
            self._dirty.add(path)
        self._link(path, False, zxid, events)

    def _link(self, path: str, created: bool, zxid: int, events: list[WatchedEvent]) -> None:
        """Add the node to its parent's children or remove it; record the events."""
        parent_path, name = _parent(path), path.rsplit("/", 1)[1]
        parent = self._nodes[parent_path]
        (parent.children.add if created else parent.children.discard)(name)
        parent.cversion, parent.pzxid = parent.cversion + 1, zxid
        self._dirty.add(parent_path)  # an ephemeral has no children: the parent is persistent
        events += [WatchedEvent("CREATED" if created else "DELETED", path),
                   WatchedEvent("CHILD", parent_path)]

    # --- commit: persist, then fire the triggered watches ---

    def _write(self, *ops: WriteOp) -> list[Any]:
        """Run ops as one transaction: all applied with one zxid, or (on any error) none."""
        self._check_open()
        zxid, events = self._zxid + 1, []
        self._dirty.clear()
        saved = None
        if len(ops) > 1:  # a single op validates before it mutates; only multi-ops roll back
            saved = {p: n.copy() for p, n in self._nodes.items()}, {
                s: set(paths) for s, paths in self._sessions.items()}
        try:
            results = [op(zxid, events) for op in ops]
        except BaseException:
            if saved is not None:
                self._nodes, self._sessions = saved
            self._dirty.clear()
            raise
        self._commit(zxid, events)
        return results

    def _arm(self, table: dict[str, dict[Watcher, int]], path: str, watch: Watcher | None) -> None:
        if watch is not None:
            self._watch_seq += 1
            table.setdefault(path, {}).setdefault(watch, self._watch_seq)

    def _commit(self, zxid: int, events: list[WatchedEvent]) -> None:
        self._zxid = zxid
        self._journal_changes(zxid)
        triggered: list[tuple[Watcher, WatchedEvent]] = []
        for event in events:  # pop every watch before running any callback
            watchers: dict[Watcher, int] = {}
            if event.type != "CHILD":
                watchers.update(self._data_watches.pop(event.path, {}))
            if event.type in ("CHILD", "DELETED"):
                watchers.update(self._child_watches.pop(event.path, {}))
            triggered += [(w, event) for w in sorted(watchers, key=watchers.__getitem__)]
        for watcher, event in triggered:
            try:
                watcher(event)
            except Exception:
                log.exception("metadata watch failed", type=event.type, path=event.path)

    # --- persistence ---

    def _journal_changes(self, zxid: int) -> None:
        """Hand the transaction's persistent nodes (written whole) and deletions to the writer."""
        nodes, deleted = {}, []
        for path in self._dirty:
            node = self._nodes.get(path)
            if node is None or node.ephemeral_owner:  # gone, or now an ephemeral (not persisted)
                deleted.append(path)
            else:
                nodes[path] = PersistedNode(node.data, node.czxid, node.mzxid, node.pzxid,
                                            node.version, node.cversion)
        self._dirty.clear()
        self._journal(MetadataTxn(zxid, self._last_session, nodes, tuple(sorted(deleted))))

    def _check_open(self) -> None:
        if self._closed:
            raise MetadataStoreError("the metadata store is closed")

    def _journal(self, txn: MetadataTxn) -> None:
        if self._writer is not None:
            self._submitted = self._writer.submit(txn)

    def _open(self, directory: Path, legacy_file: Path | None, min_roll_bytes: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        try:
            if legacy_file is not None and legacy_file.exists():
                self._convert(legacy_file, directory)
            loaded = load_image(directory, repair=True)
        except CorruptMetadataError as exc:
            raise MetadataStoreError(f"{exc} (restore {directory} from a backup, or move it "
                                     "away to start an empty cluster)") from exc
        if loaded.torn_bytes:
            log.warning("metadata journal had a torn tail (a crash during a write): dropped it",
                        path=str(directory / JOURNAL), bytes=loaded.torn_bytes)
        self._install(loaded.image)
        self._writer = JournalWriter(directory, loaded, self._on_durable,
                                     min_roll_bytes=min_roll_bytes)

    def _install(self, image: MetadataImage) -> None:
        self._zxid, self._last_session = image.zxid, image.last_session
        for node_path in sorted(image.nodes):  # a parent sorts before its children
            n = image.nodes[node_path]
            node = _Node(n.data, n.czxid, n.mzxid, n.pzxid, n.version, n.cversion)
            if node_path != "/":
                parent = self._nodes.get(_parent(_validate(node_path)))
                if parent is None:
                    raise MetadataStoreError(f"metadata node {node_path} has no parent on disk")
                parent.children.add(node_path.rsplit("/", 1)[1])
            self._nodes[node_path] = node

    @staticmethod
    def _convert(legacy_file: Path, directory: Path) -> None:
        """Write a format-1 store as the snapshot, once (a crash before the file is removed leaves
        a snapshot, and the file is then only removed)."""
        if not (directory / SNAPSHOT).exists():
            if (directory / JOURNAL).exists() and (directory / JOURNAL).stat().st_size:
                raise MetadataStoreError(
                    f"both {legacy_file} (format 1) and the journal in {directory} exist: "
                    "move away the one that is not current")
            write_snapshot(directory, read_legacy_store(legacy_file))
            log.warning("metadata store converted to a snapshot and a journal",
                        old=str(legacy_file), new=str(directory))
        legacy_file.unlink()
        fsync_dir(legacy_file.parent)


def _journal_failed(error: BaseException) -> MetadataStoreError:
    return MetadataStoreError(f"the metadata journal could not be written ({error!r}); changes "
                              "since are in memory only: fix the disk and restart")


def _resolve(future: asyncio.Future[None], error: BaseException | None) -> None:
    if not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(_journal_failed(error))


def _check_bytes(data: object) -> None:
    if not isinstance(data, bytes):
        raise TypeError(f"node data must be bytes, not {type(data).__name__}")


class Transaction:
    """Several writes applied atomically with one zxid, or not at all (the first failure raises).

    Used as `with store.transaction() as t: ...`, it commits when the block ends without an error.
    """

    def __init__(self, store: EmbeddedMetadataStore) -> None:
        self._store = store
        self._ops: list[WriteOp] = []
        self.results: list[Any] | None = None

    def check(self, path: str, version: int) -> None:
        self._ops.append(lambda z, e: bool(self._store._check_version(path, version)))

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               session: int | None = None, sequence: bool = False,
               makepath: bool = False) -> None:
        self._ops.append(partial(self._store._create, path, data, ephemeral, session, sequence,
                                 makepath))

    def set(self, path: str, data: bytes, version: int = -1) -> None:
        self._ops.append(partial(self._store._set, path, data, version))

    def delete(self, path: str, version: int = -1) -> None:
        self._ops.append(partial(self._store._delete, path, version, False))

    def commit(self) -> list[Any]:
        """Apply the ops; the results are paths for creates, stats for sets, True/None otherwise."""
        if self.results is not None:
            raise MetadataStoreError("transaction already committed")
        self.results = self._store._write(*self._ops) if self._ops else []
        return self.results

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.commit()
