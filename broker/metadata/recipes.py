"""Recipes on any metadata store, named as in kazoo: DataWatch and ChildrenWatch, one-shot watches
re-armed by a read after every event.

The read runs in a task of the recipe's own, so a watch never holds the loop; events that arrive
before it has read again are one read, as ZooKeeper's one-shot watches make a burst of changes
one notification. fn may be a coroutine function: the next read waits for it. A read the store cannot answer (ZooKeeper unreachable) is tried again with a
backoff until it succeeds or the recipe is cancelled.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

from broker.logs import get_logger
from broker.metadata.store import (
    RETRY_BACKOFF_S,
    ConnectionLossError,
    MetadataStore,
    NoNodeError,
    SessionExpiredError,
    Stat,
    WatchedEvent,
    Watcher,
)

log = get_logger("kafka_sim.metadata_recipes")


class _Recipe:
    """A watch re-armed after every event: `_read` reads with the watch and calls fn; `start`
    makes the first read (its errors raise) and returns the recipe."""

    def __init__(self, store: MetadataStore, path: str, fn: Callable[..., object]) -> None:
        self._store, self.path, self._fn = store, path, fn
        self.stopped = False
        self._watcher: Watcher = self._on_event
        self._task: asyncio.Task | None = None
        self._reading = False
        self._again = False  # an event came while reading: read once more

    async def start(self) -> _Recipe:
        self._reading = True
        try:
            await self._read()
        except BaseException:
            self.cancel()
            raise
        finally:
            self._reading = False
        if self._again and not self.stopped:
            self._spawn()
        return self

    def _on_event(self, event: WatchedEvent) -> None:
        if self.stopped:
            return
        if self._reading or self._task is not None:
            self._again = True
            return
        self._spawn()

    def _spawn(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._follow(), name=f"watch {self.path}")

    async def _follow(self) -> None:
        backoff = RETRY_BACKOFF_S[0]
        try:
            while not self.stopped:
                self._again = False
                self._reading = True
                try:
                    await self._read()
                except (ConnectionLossError, SessionExpiredError) as exc:
                    # The watch is not armed: read again once the store answers.
                    log.info("watch read failed; retrying", path=self.path, reason=str(exc))
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, RETRY_BACKOFF_S[1])
                    self._again = True
                except Exception:
                    log.exception("metadata watch failed", path=self.path)
                finally:
                    self._reading = False
                if not self._again:
                    return
        finally:
            self._task = None

    async def _read(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        self.stopped = True
        self._store.remove_watch(self.path, self._watcher)
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()


class DataWatch(_Recipe):
    """Calls fn(data, stat) at start and after every change; (None, None) while the node is absent.

    As in kazoo, fn returning False stops the watch; so does `cancel()`.
    """

    def __init__(self, store: MetadataStore, path: str,
                 fn: Callable[[bytes | None, Stat | None], object]) -> None:
        super().__init__(store, path, fn)

    async def _read(self) -> None:
        while True:
            try:
                data, stat = await self._store.get(self.path, self._watcher)
                break
            except NoNodeError:
                # exists() arms the watch for the node's creation; if it was created between
                # the two calls, read it
                data, stat = None, await self._store.exists(self.path, self._watcher)
                if stat is None:
                    break
        if not self.stopped and await _called(self._fn, data, stat) is False:
            self.cancel()


class ChildrenWatch(_Recipe):
    """Calls fn(children) at start and after every child change; stops when the node is deleted.

    Unlike kazoo, a missing node raises NoNodeError from `start` instead of silently never firing.
    """

    def __init__(self, store: MetadataStore, path: str,
                 fn: Callable[[list[str]], object]) -> None:
        super().__init__(store, path, fn)

    def _on_event(self, event: WatchedEvent) -> None:
        if event.type == "DELETED":
            self.cancel()
            return
        super()._on_event(event)

    async def _read(self) -> None:
        try:
            children = await self._store.get_children(self.path, self._watcher)
        except NoNodeError:
            if self._task is None:
                raise  # at start: the caller hears of it
            self.cancel()
            return
        if not self.stopped and await _called(self._fn, children) is False:
            self.cancel()


async def _called(fn: Callable[..., object], *args: object) -> object:
    result = fn(*args)
    return await result if inspect.isawaitable(result) else result
