"""DelayedShareFetch: a ShareFetch that found no record to acquire, parked in the share fetch
purgatory (as DelayedFetch is in the fetch purgatory) until an append, a release or a lock's
expiry makes records available on one of its partitions, or its MaxWaitMs runs out."""

from __future__ import annotations

from collections.abc import Callable

from broker.replication.purgatory import DelayedOperation


class DelayedShareFetch(DelayedOperation):
    __slots__ = ("_ready", "_complete")

    def __init__(self, delay_ms: int, ready: Callable[[], bool],
                 complete: Callable[[], None]) -> None:
        super().__init__(delay_ms)
        self._ready = ready  # records can be acquired on one of its partitions
        self._complete = complete  # acquire what is there and answer

    def try_complete(self) -> bool:
        return self.force_complete() if self._ready() else False

    def on_complete(self) -> None:
        self._complete()

    def on_expiration(self) -> None:  # on_complete answered with what there was (nothing)
        pass
