"""DelayedPartitionAcks: the shape DelayedProduce and DelayedDeleteRecords share — a request that
waits per partition until each is settled (acknowledged or failed), the rest timing out together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker.replication.purgatory import DelayedOperation


class DelayedPartitionAcks(DelayedOperation):
    def __init__(
        self,
        timeout_ms: int,
        statuses: dict[tuple[str, int], Any],
        *,
        settle: Callable[[tuple[str, int], Any], bool],
        future: asyncio.Future,
    ) -> None:
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._settle = settle  # records the partition's outcome and says True once it has one
        self.future = future

    def time_out(self, status: Any) -> None:
        """Mark a partition still waiting at the timeout."""
        raise NotImplementedError

    def try_complete(self) -> bool:
        for key, status in self.statuses.items():
            if status.acks_pending and self._settle(key, status):
                status.acks_pending = False
        if any(s.acks_pending for s in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:  # the timeout struck first
                self.time_out(status)
        if not self.future.done():
            self.future.set_result(None)

    def on_expiration(self) -> None:
        pass
