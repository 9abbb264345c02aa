"""Recipes on any metadata store, named as in kazoo: DataWatch and ChildrenWatch, one-shot watches
re-armed after every event."""

from __future__ import annotations

from collections.abc import Callable

from broker.metadata.store import MetadataStore, NoNodeError, WatchedEvent, Watcher


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
