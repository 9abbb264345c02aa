"""DelayedProduce: an acks=-1 produce that waits in the purgatory until the ISR has the records.

It completes, per partition, when (Kafka's cases):
  A. this broker is no longer the partition's leader: NOT_LEADER_OR_FOLLOWER,
  B. the high watermark reached the last appended offset + 1: success, unless the ISR fell below
     min.insync.replicas meanwhile: NOT_ENOUGH_REPLICAS_AFTER_APPEND,
  C. the append itself failed: that error, already known when the operation was made;
and as a whole at the request timeout, where partitions still waiting get REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from broker.purgatory import DelayedOperation
from protocol.errors import ErrorCode


@dataclass(slots=True)
class ProducePartitionStatus:
    required_offset: int  # last appended offset + 1
    result: object  # ProduceResult, completed in place
    acks_pending: bool = True


class DelayedProduce(DelayedOperation):
    def __init__(
        self,
        timeout_ms: int,
        statuses: dict[tuple[str, int], ProducePartitionStatus],
        *,
        check: Callable[[tuple[str, int], ProducePartitionStatus], ErrorCode | None],
        future: asyncio.Future,
    ) -> None:
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._check = check  # None: still waiting; a code: this partition is done (NONE = ok)
        self.future = future

    def try_complete(self) -> bool:
        for key, status in self.statuses.items():
            if status.acks_pending:
                code = self._check(key, status)
                if code is not None:
                    status.acks_pending = False
                    status.result.error = code  # type: ignore[attr-defined]
        if any(s.acks_pending for s in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:  # the timeout struck first
                status.result.error = ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
        if not self.future.done():
            self.future.set_result(None)

    def on_expiration(self) -> None:
        pass
