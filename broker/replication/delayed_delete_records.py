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

from broker.replication.delayed_acks import DelayedPartitionAcks
from protocol.errors import ErrorCode


@dataclass(slots=True)
class DeleteRecordsPartitionStatus:
    """A partition of a DeleteRecords waiting for its followers' low watermark."""
    required_offset: int  # the new log start offset (-1 in the request: the high watermark)
    low_watermark: int = -1
    error: ErrorCode = ErrorCode.NONE
    acks_pending: bool = True


class DelayedDeleteRecords(DelayedPartitionAcks):
    def __init__(
        self,
        timeout_ms: int,
        statuses: dict[tuple[str, int], DeleteRecordsPartitionStatus],
        *,
        low_watermark: Callable[[tuple[str, int]], int | None],
        future: asyncio.Future,
    ) -> None:
        def settle(key: tuple[str, int], status: DeleteRecordsPartitionStatus) -> bool:
            low = low_watermark(key)  # None: not the leader any more
            if low is None:  # case A
                status.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                return True
            if low >= status.required_offset:  # case B
                status.low_watermark = low
                return True
            return False

        super().__init__(timeout_ms, statuses, settle=settle, future=future)

    def time_out(self, status: DeleteRecordsPartitionStatus) -> None:
        status.error = ErrorCode.REQUEST_TIMED_OUT
