"""DelayedFetch: a Fetch that waits in the purgatory until enough bytes are visible or max wait passes.

It completes when (Kafka's cases):
  A. a partition it reads is no longer known or no longer led here, or its leader epoch is no
     longer the one the fetch named (answered FENCED_LEADER_EPOCH),
  B. a fetch offset lies beyond what the fetcher may see (the log was truncated under it),
  C. the bytes visible to the fetcher (below the high watermark for consumers, below the log end
     offset for followers) from all its fetch offsets add up to at least min_bytes,
  D. max_wait_ms has passed (the timer expires it).
The read itself happens once, in on_complete, so the answer holds what is there at that moment.
Whatever goes wrong in checking or reading, the fetch is answered: a check that raises completes
it, and a read that raises answers UNKNOWN_SERVER_ERROR for every partition, so the client's
connection (which answers in order) is never left waiting.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker.logs import get_logger
from broker.replication.purgatory import DelayedOperation
from protocol.errors import ErrorCode
from protocol.file_region import FileRegion
from storage.transaction_index import AbortedTxn

READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # a Fetch's and ListOffsets' isolation_level

log = get_logger("kafka_sim.delayed_fetch")


@dataclass(slots=True)
class FetchPartition:
    """One partition of a Fetch request."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start offset (Fetch v5+)
    # Fetch v13+ names topics by id (Kafka's TopicIdPartition); None below v13. An id the broker
    # does not know leaves `topic` "" and is answered UNKNOWN_TOPIC_ID without a read.
    topic_id: uuid.UUID | None = None

    @property
    def key(self) -> tuple[str | uuid.UUID, int]:
        """What a session and a request's de-duplication key it by: the id when it has one."""
        return (self.topic if self.topic_id is None else self.topic_id, self.partition)


def distinct_partitions(partitions: list[FetchPartition]) -> list[FetchPartition]:
    """Each topic-partition once, as Kafka's FetchRequest.fetchData() builds its LinkedHashMap: a
    later duplicate's fetch offset and sizes replace the earlier one's, at the earlier one's place.
    So a Fetch listing one partition a thousand times costs, parks and answers as one listing it
    once."""
    by_key: dict[tuple[str | uuid.UUID, int], FetchPartition] = {}
    for fp in partitions:
        by_key[fp.key] = fp  # dict assignment keeps the first insertion's place
    return list(by_key.values())


@dataclass(slots=True)
class FetchParams:
    """A Fetch request's terms: who fetches, how long to wait, how much."""
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0
    # Its records may be FileRegions, sent from the segment files (a plaintext TCP connection)
    zero_copy: bool = False

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(slots=True)
class FetchPartitionData:
    """What a Fetch response says about one partition."""

    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | FileRegion = b""
    aborted_transactions: list[AbortedTxn] | None = None  # read_committed consumers only
    # Where this fetcher may read up to (HW, LSO or, for a follower, the LEO) when it was read:
    # a session partition below it still has records to hand out.
    end_offset: int = -1


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        params: FetchParams,
        partitions: list[FetchPartition],
        *,
        bytes_available: Callable[[FetchParams, FetchPartition], int | None],
        read: Callable[[FetchParams, list[FetchPartition]], list[FetchPartitionData]],
        future: asyncio.Future,
        candidates: Callable[[], list[FetchPartition]] | None = None,
    ) -> None:
        super().__init__(params.max_wait_ms)
        self.params = params
        self.partitions = distinct_partitions(partitions)  # its checks cost per distinct partition
        self._bytes_available = bytes_available
        self._read = read
        self.future = future
        # What a check looks at, when not every partition (a fetch session's: those changed
        # since it read; the others had nothing then and still have nothing)
        self._candidates = candidates

    def try_complete(self) -> bool:
        accumulated = 0
        checked = self.partitions if self._candidates is None else self._candidates()
        for fetch_partition in checked:
            try:
                available = self._bytes_available(self.params, fetch_partition)
            except Exception:  # as Kafka's tryComplete: answer now, the read reports the error
                log.exception("checking a parked fetch failed; answering it now",
                              topic=fetch_partition.topic, partition=fetch_partition.partition)
                available = None
            if available is None:  # cases A and B
                return self.force_complete()
            accumulated += available
            if accumulated >= self.params.min_bytes and accumulated > 0:
                # Case C, known without checking the rest: a follower's fetch (min_bytes 1) over
                # many idle partitions stops at the first with data. The read reports the rest.
                return self.force_complete()
        if accumulated >= self.params.min_bytes:  # case C (min_bytes 0)
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        partitions, self.partitions = self.partitions, []  # the watcher lists keep a completed
        if self.future.done():  # operation until purged: nothing of its request with it
            return
        try:
            results = self._read(self.params, partitions)
        except Exception:
            log.exception("reading a parked fetch failed; answering UNKNOWN_SERVER_ERROR")
            results = [FetchPartitionData(ErrorCode.UNKNOWN_SERVER_ERROR) for _ in partitions]
        self.future.set_result(results)

    def on_expiration(self) -> None:  # case D: on_complete already answered with what is there
        pass
