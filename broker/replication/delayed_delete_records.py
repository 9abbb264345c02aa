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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.replication.delayed_acks import DelayedPartitionAcks
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.replication.partition import Partition


@dataclass(slots=True)
class DeleteRecordsPartitionStatus:
    """A partition of a DeleteRecords waiting for its followers' low watermark."""
    required_offset: int  # the new log start offset (-1 in the request: the high watermark)
    low_watermark: int = -1
    error: ErrorCode = ErrorCode.NONE
    acks_pending: bool = True


class DelayedDeleteRecords(DelayedPartitionAcks[DeleteRecordsPartitionStatus]):
    def settle(self, partition: Partition,
               status: DeleteRecordsPartitionStatus) -> tuple[bool, ErrorCode]:
        if not partition.is_leader:  # case A
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        low = partition.low_watermark
        if low >= status.required_offset:  # case B
            status.low_watermark = low
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    def fail(self, status: DeleteRecordsPartitionStatus, error: ErrorCode) -> None:
        status.error = error
