"""Recipes on the metadata store, named as in kazoo: multi-op transactions applied atomically, and
DataWatch/ChildrenWatch, one-shot watches re-armed after every event."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from broker.metadata_store import (
    MetadataStore,
    MetadataStoreError,
    NoNodeError,
    WatchedEvent,
    Watcher,
    WriteOp,
)


class Transaction:
    """Several writes applied atomically with one zxid, or not at all (the first failure raises).

    Used as `with store.transaction() as t: ...`, it commits when the block ends without an error.
    """

    def __init__(self, store: MetadataStore) -> None:
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


class _Recipe:
    """A watch re-armed after every event: `_run` reads with the watch and calls fn."""

    def __init__(self, store: MetadataStore, path: str, fn: Callable[..., object]) -> None:
        self._store, self.path, self._fn = store, path, fn
        self.stopped = False
        self._watcher: Watcher = self._on_event
        try:
            self._run()
        except BaseException:
            self.cancel()
            raise

    def _on_event(self, event: WatchedEvent) -> None:
        if not self.stopped:
            self._run()

    def _run(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        self.stopped = True
        self._store.remove_watch(self.path, self._watcher)


class DataWatch(_Recipe):
    """Calls fn(data, stat) now and after every change; (None, None) while the node is absent.

    As in kazoo, fn returning False stops the watch; so does `cancel()`.
    """

    def _run(self) -> None:
        try:
            data, stat = self._store.get(self.path, self._watcher)
        except NoNodeError:
            data, stat = None, self._store.exists(self.path, self._watcher)
        if self._fn(data, stat) is False:
            self.cancel()


class ChildrenWatch(_Recipe):
    """Calls fn(children) now and after every child change; stops when the node is deleted.

    Unlike kazoo, a missing node raises NoNodeError at once instead of silently never firing.
    """

    def _on_event(self, event: WatchedEvent) -> None:
        if event.type == "DELETED":
            self.stopped = True
        super()._on_event(event)

    def _run(self) -> None:
        if self._fn(self._store.get_children(self.path, self._watcher)) is False:
            self.cancel()
