"""Purgatories: DelayedOperation (a request that waits, completed exactly once) and
DelayedOperationPurgatory (watcher lists by key, timeouts on the shared SystemTimer).

Two verbs, as in Kafka: `try_complete_else_watch(op, keys)` when a request arrives that may have to
wait, and `check_and_complete(key)` whenever something that key stands for changes (a high
watermark moves, bytes are appended, a member joins). Everything runs on the event loop's thread,
so there are no locks; "exactly once" is about the several paths that may try to finish one op.

One operation's failure stays its own: an exception from its `try_complete` completes it (its
`on_complete` answers), and one from its `on_complete` is logged (by the purgatory, or by the
timer at expiry), never raised into whoever triggered the check (a produce) nor into the other
operations on that key. Operations answer their caller's future even when their own work fails
(DelayedFetch: UNKNOWN_SERVER_ERROR; the ReplicaManager fails the future of any other kind).
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Callable, Hashable, Iterable

from broker.logs import get_logger
from timer import SystemTimer, TimerTask

log = get_logger("kafka_sim.purgatory")
DoneCallback = Callable[["DelayedOperation"], None]


class DelayedOperation(TimerTask):
    """An operation that completes when `try_complete` finds it can, or when its delay runs out.

    Subclasses implement:
    - `try_complete()`: check the condition; if met, `return self.force_complete()`; else False.
    - `on_complete()`: the one place the answer is produced (resolve a future, build a response).
    - `on_expiration()`: bookkeeping after a timeout; `on_complete` has already run by then.

    Completion is exactly once whichever path gets there first: `check_and_complete`, expiry by the
    timer, or a direct `force_complete`. No future is created unless someone awaits `wait()`, so
    operations work in unit tests without a running loop.
    """

    __slots__ = ("_completed", "_expired", "_callbacks")

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._completed = False
        self._expired = False
        self._callbacks: list[DoneCallback] | None = None

    @abstractmethod
    def try_complete(self) -> bool: ...

    @abstractmethod
    def on_complete(self) -> None: ...

    @abstractmethod
    def on_expiration(self) -> None: ...

    def force_complete(self) -> bool:
        """Complete now; True only for the one caller that actually completed the operation."""
        return self._finish(expired=False)

    def run(self) -> None:
        """The timer's call at timeout: complete (if nobody did first), then `on_expiration`."""
        self._finish(expired=True)

    def _finish(self, expired: bool) -> bool:
        if self._completed:
            return False
        self._completed = True
        self._expired = expired
        self.cancel()  # leave the timer at once: a completed op must not hold a bucket slot
        try:
            self.on_complete()
            if expired:
                self.on_expiration()
        finally:
            callbacks, self._callbacks = self._callbacks, None
            for callback in callbacks or ():
                callback(self)
        return True

    @property
    def is_completed(self) -> bool:
        return self._completed

    @property
    def expired(self) -> bool:
        """True if the operation was completed by its timeout."""
        return self._expired

    def add_done_callback(self, callback: DoneCallback) -> None:
        """Call `callback(op)` after completion (at once if already complete)."""
        if self._completed:
            callback(self)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    async def wait(self) -> None:
        """Wait until the operation is complete (the future exists only while someone waits)."""
        if self._completed:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def resolve(_op: DelayedOperation) -> None:
            if not future.done():
                future.set_result(None)

        self.add_done_callback(resolve)
        await future


class DelayedOperationPurgatory:
    """Operations waiting on keys (e.g. ("topic", 0)), each also timed out by the shared timer.

    Watcher lists keep completed operations until `check_and_complete` walks that key or a purge
    runs; a purge runs, when an operation is parked or the reaper advances the timer, once the
    estimate of completed-but-still-watched operations (operations ever watched since the last
    purge, minus those still pending in the timer) passes `purge_interval`. Counters: `completed_count` counts completions before timeout,
    `expired_count` timeouts.
    """

    def __init__(self, name: str, timer: SystemTimer, purge_interval: int = 1000) -> None:
        self.name = name
        self.timer = timer
        self.purge_interval = purge_interval
        self.watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._pending: dict[int, DelayedOperation] = {}  # id(op) -> op, for ops in the timer
        self._estimated_watched = 0
        self.completed_count = 0
        self.expired_count = 0
        self.purged_count = 0
        self.purge_runs = 0
        # As Kafka's expired-operation reaper: each advance of the clock also purges when due, so
        # an idle purgatory does not keep its completed operations
        timer.add_housekeeping(self._maybe_purge)

    # --- the two verbs -----------------------------------------------------------------------

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if it can; else watch it on every key and start its timeout.

        Kafka's order: try; watch on all keys; try again (a key may have changed while we were
        adding watchers); only then add it to the timer. True if `op` completed in here.
        """
        keys = list(dict.fromkeys(keys))
        if not keys:
            raise ValueError("an operation must be watched on at least one key")
        if self._safe_try_complete(op):
            self.completed_count += 1
            return True
        op.add_done_callback(self._on_done)
        for key in keys:
            if op.is_completed:  # completed from elsewhere meanwhile: stop watching
                return False
            self.watchers.setdefault(key, []).append(op)
        self._estimated_watched += 1
        if not op.is_completed and self._safe_try_complete(op):
            return True
        if not op.is_completed:
            self._pending[id(op)] = op
            self.timer.add(op)  # may run it at once when its delay is already over
        self._maybe_purge()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try every operation watched on `key`; returns how many this call completed."""
        ops = self.watchers.get(key)
        if not ops:
            return 0
        completed = 0
        for op in list(ops):  # a snapshot: completing an op may watch new ones on this key
            if not op.is_completed and self._safe_try_complete(op):
                completed += 1
        self._drop_completed(key)
        return completed

    @staticmethod
    def _safe_try_complete(op: DelayedOperation) -> bool:
        """`op.try_complete()`; one that raises is completed now (it answers with what it has, or
        its error), so neither the caller nor the other operations on the key are stopped."""
        try:
            return op.try_complete()
        except Exception:
            log.exception("delayed operation failed", operation=type(op).__name__)
            if op.is_completed:
                return True  # it completed, and its on_complete raised: logged, and done with
            try:
                return op.force_complete()
            except Exception:
                log.exception("delayed operation failed to complete", operation=type(op).__name__)
                return True

    # --- cancelling and cleaning up ----------------------------------------------------------

    def cancel_for_key(self, key: Hashable) -> list[DelayedOperation]:
        """Stop watching `key` and cancel the timeouts of its unfinished ops, which are returned
        (still uncompleted) so the caller can answer them; other keys' lists are left alone."""
        ops = self.watchers.pop(key, [])
        cancelled = [op for op in ops if not op.is_completed]
        for op in cancelled:
            op.cancel()
            self._pending.pop(id(op), None)
        return cancelled

    def shutdown(self) -> list[DelayedOperation]:
        """Drop every watcher and cancel every timeout; returns the ops left uncompleted.

        The timer is shared by all purgatories, so it is not shut down here.
        """
        seen: dict[int, DelayedOperation] = {}
        for ops in self.watchers.values():
            for op in ops:
                if not op.is_completed:
                    seen.setdefault(id(op), op)
        for op in self._pending.values():
            seen.setdefault(id(op), op)
        for op in seen.values():
            op.cancel()
        self.watchers.clear()
        self._pending.clear()
        self._estimated_watched = 0
        self.timer.remove_housekeeping(self._maybe_purge)
        return list(seen.values())

    def purge(self) -> int:
        """Remove completed operations from every watcher list; returns how many were removed."""
        removed = 0
        for key in list(self.watchers):
            removed += self._drop_completed(key)
        self.purged_count += removed
        self.purge_runs += 1
        self._estimated_watched = self.delayed
        return removed

    def _maybe_purge(self) -> None:
        if self._estimated_watched - self.delayed > self.purge_interval:
            self.purge()

    def _drop_completed(self, key: Hashable) -> int:
        ops = self.watchers.get(key)
        if ops is None:
            return 0
        live = [op for op in ops if not op.is_completed]
        if live:
            self.watchers[key] = live
        else:
            del self.watchers[key]  # no empty lists left behind for keys nobody waits on
        return len(ops) - len(live)

    def _on_done(self, op: DelayedOperation) -> None:
        self._pending.pop(id(op), None)
        if op.expired:
            self.expired_count += 1
        else:
            self.completed_count += 1

    @property
    def delayed(self) -> int:
        """Operations waiting in the timer for their timeout."""
        return len(self._pending)
