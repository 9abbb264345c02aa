"""DelayedProduce: an acks=-1 produce that waits in the purgatory until the ISR has the records.

It completes, per partition, when (Kafka's cases):
  A. this broker is no longer the partition's leader: NOT_LEADER_OR_FOLLOWER,
  B. the high watermark reached the last appended offset + 1: success, unless the ISR fell below
     min.insync.replicas meanwhile: NOT_ENOUGH_REPLICAS_AFTER_APPEND,
  C. the append itself failed: that error, already known when the operation was made;
and as a whole at the request timeout, where partitions still waiting get REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.replication.delayed_acks import DelayedPartitionAcks
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.replication.partition import Partition


@dataclass(slots=True)
class ProduceResult:
    """A partition's answer to Produce: offsets, or an error (with KIP-467's record errors)."""
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    # KIP-467: (index of the record in its batch, message) per record that made the batch fail.
    record_errors: list[tuple[int, str]] = field(default_factory=list)


@dataclass(slots=True)
class ProducePartitionStatus:
    """A partition of a Produce with acks=-1 waiting for its ISR."""
    required_offset: int  # last appended offset + 1
    result: ProduceResult  # completed in place
    acks_pending: bool = True


class DelayedProduce(DelayedPartitionAcks[ProducePartitionStatus]):
    """Kafka's DelayedProduce: case A and B are the partition's checkEnoughReplicasReachOffset,
    case C never waits (its status is made settled)."""

    def settle(self, partition: Partition, status: ProducePartitionStatus) -> tuple[bool, ErrorCode]:
        return partition.check_enough_replicas_reach_offset(status.required_offset)

    def fail(self, status: ProducePartitionStatus, error: ErrorCode) -> None:
        status.result.error = error
