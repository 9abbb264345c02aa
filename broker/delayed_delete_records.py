"""DelayedDeleteRecords: a DeleteRecords that waits in the purgatory until the ISR has moved its
log start offsets up to the requested offsets.

It completes, per partition, when (Kafka's cases):
  A. this broker is no longer the partition's leader: NOT_LEADER_OR_FOLLOWER,
  B. the low watermark (the smallest log start offset over the ISR, learnt from the followers'
     fetches) reached the requested offset: success, answering that low watermark,
  C. moving the leader's own log start offset failed: that error, known when the operation was made;
and as a whole at the request timeout, where partitions still waiting get REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from broker.purgatory import DelayedOperation
from protocol.errors import ErrorCode


@dataclass(slots=True)
class DeleteRecordsPartitionStatus:
    required_offset: int  # the new log start offset (-1 in the request: the high watermark)
    low_watermark: int = -1
    error: ErrorCode = ErrorCode.NONE
    acks_pending: bool = True


class DelayedDeleteRecords(DelayedOperation):
    def __init__(
        self,
        timeout_ms: int,
        statuses: dict[tuple[str, int], DeleteRecordsPartitionStatus],
        *,
        low_watermark: Callable[[tuple[str, int]], int | None],
        future: asyncio.Future,
    ) -> None:
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._low_watermark = low_watermark  # None: not the leader any more
        self.future = future

    def try_complete(self) -> bool:
        for key, status in self.statuses.items():
            if not status.acks_pending:
                continue
            low = self._low_watermark(key)
            if low is None:  # case A
                status.acks_pending, status.error = False, ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif low >= status.required_offset:  # case B
                status.acks_pending, status.low_watermark = False, low
        if any(s.acks_pending for s in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:  # the timeout struck first
                status.error = ErrorCode.REQUEST_TIMED_OUT
        if not self.future.done():
            self.future.set_result(None)

    def on_expiration(self) -> None:
        pass
