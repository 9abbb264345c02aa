"""DelayedPartitionAcks: the shape DelayedProduce and DelayedDeleteRecords share: a request that
waits per partition until each is settled (acknowledged or failed), the rest timing out together.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from broker.replication.purgatory import DelayedOperation
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.replication.partition import HostedPartitions, Partition


class PartitionAckStatus(Protocol):
    acks_pending: bool


S = TypeVar("S", bound=PartitionAckStatus)


class DelayedPartitionAcks(DelayedOperation, Generic[S]):
    def __init__(self, timeout_ms: int, statuses: dict[tuple[str, int], S], *,
                 replicas: HostedPartitions, future: asyncio.Future) -> None:
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._replicas = replicas
        self.future = future

    @abstractmethod
    def settle(self, partition: Partition, status: S) -> tuple[bool, ErrorCode]:
        """Whether the partition's wait is over, and with which error (NONE: acknowledged)."""

    @abstractmethod
    def fail(self, status: S, error: ErrorCode) -> None:
        """Record a partition's error: its own, or REQUEST_TIMED_OUT at the timeout."""

    def try_complete(self) -> bool:
        for (topic, index), status in self.statuses.items():
            if not status.acks_pending:
                continue
            try:
                done, error = self.settle(self._replicas.hosted_partition(topic, index), status)
            except KafkaError as exc:  # gone from here, or its log dir failed
                done, error = True, exc.code
            if done or error != ErrorCode.NONE:
                status.acks_pending = False
                if error != ErrorCode.NONE:
                    self.fail(status, error)
        if any(s.acks_pending for s in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:  # the timeout struck first
                self.fail(status, ErrorCode.REQUEST_TIMED_OUT)
        if not self.future.done():
            self.future.set_result(None)

    def on_expiration(self) -> None:
        pass
