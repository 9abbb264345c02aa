"""DelayedFetch: a Fetch that waits in the purgatory until enough bytes are visible or max wait passes.

Its try_complete holds Kafka's cases; the fetch completes when, for a partition it reads:
  A. the partition is no longer led here (NOT_LEADER_OR_FOLLOWER), or the fetching follower is no
     longer one of its replicas;
  B. the partition is unknown here (UNKNOWN_TOPIC_OR_PARTITION) or on an offline log dir
     (KAFKA_STORAGE_ERROR);
  E. its leader epoch is no longer the one the fetch named (FENCED_LEADER_EPOCH);
  F. the fetch offset and the offset the fetcher may read up to lie on different segments: the
     log was truncated under the fetch offset, or rolled past it (or the fetch offset fell below
     the log start offset);
  G. the bytes between each fetch offset's position and the position of the offset the fetcher
     may read up to (the high watermark for consumers, the last stable offset for read_committed
     ones, the log end offset for followers) add up to min_bytes: positions compared, no bytes read;
and, as a whole, when max_wait_ms has passed (the timer expires it).
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
from typing import TYPE_CHECKING

from broker.logs import get_logger
from broker.replication.purgatory import DelayedOperation
from protocol.errors import ErrorCode, KafkaError
from protocol.file_region import FileRegion
from storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from broker.replication.partition import HostedPartitions, Partition
    from storage.log_info import LogOffsetMetadata

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

    def end_offset(self, partition: Partition) -> int:
        """Where this fetcher may read up to (Kafka's FetchIsolation): followers to the log end
        offset, consumers to the high watermark, read_committed consumers to the last stable
        offset."""
        if self.is_from_follower:
            return partition.log_end_offset
        if self.isolation_level == READ_COMMITTED:
            return partition.log.last_stable_offset
        return partition.high_watermark


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
        replicas: HostedPartitions,
        read: Callable[[FetchParams, list[FetchPartition]], list[FetchPartitionData]],
        future: asyncio.Future,
        candidates: Callable[[], list[FetchPartition]] | None = None,
    ) -> None:
        super().__init__(params.max_wait_ms)
        self.params = params
        self.partitions = distinct_partitions(partitions)  # its checks cost per distinct partition
        self._replicas = replicas
        self._read = read
        self.future = future
        # What a check looks at, when not every partition (a fetch session's: those changed
        # since it read; the others had nothing then and still have nothing)
        self._candidates = candidates
        # Each fetch offset's place in the log (Kafka's fetchOffsetMetadata), found at its first
        # check: a later one compares positions with it
        self._start: dict[tuple[str, int], LogOffsetMetadata] = {}

    def try_complete(self) -> bool:
        accumulated = 0
        checked = self.partitions if self._candidates is None else self._candidates()
        for fetch_partition in checked:
            try:
                available = self._bytes_available(fetch_partition)
            except KafkaError:  # cases A, B and E: the read answers the error
                return self.force_complete()
            except Exception:  # as Kafka's tryComplete: answer now, the read reports the error
                log.exception("checking a parked fetch failed; answering it now",
                              topic=fetch_partition.topic, partition=fetch_partition.partition)
                return self.force_complete()
            if available is None:  # case F
                return self.force_complete()
            accumulated += available
            if accumulated >= self.params.min_bytes and accumulated > 0:
                # Case G, known without checking the rest: a follower's fetch (min_bytes 1) over
                # many idle partitions stops at the first with data. The read reports the rest.
                return self.force_complete()
        if accumulated >= self.params.min_bytes:  # case G (min_bytes 0)
            return self.force_complete()
        return False

    def _bytes_available(self, fp: FetchPartition) -> int | None:
        """Bytes this fetch could read from `fp` now, by positions; None for case F. Raises the
        partition's error for cases A, B and E."""
        params = self.params
        partition = self._replicas.partition_with_epoch(fp.topic, fp.partition,
                                                        fp.current_leader_epoch)
        if params.is_from_follower and not partition.is_remote_replica(params.replica_id):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # case A: reassigned away
        log_ = partition.log
        if fp.fetch_offset < log_.log_start_offset:
            return None  # case F: DeleteRecords or retention passed it
        key = (fp.topic, fp.partition)
        start = self._start.get(key)
        if start is None:
            start = self._start[key] = log_.offset_metadata(fp.fetch_offset)
        end = log_.offset_metadata(params.end_offset(partition))
        if end.message_offset == start.message_offset:
            return 0
        if end.on_older_segment(start) or start.on_older_segment(end):
            return None  # case F: truncated under the fetch offset, or rolled past it
        if start.message_offset > end.message_offset:
            # Beyond what it may see: a follower's offset past the log end answers (the read says
            # OFFSET_OUT_OF_RANGE); a consumer's past the high watermark waits for it.
            return None if params.is_from_follower else 0
        # At least a byte: a cleaned segment may have moved the positions under the offsets.
        return max(1, min(end.position_diff(start), fp.partition_max_bytes))

    def on_complete(self) -> None:
        partitions, self.partitions = self.partitions, []  # the watcher lists keep a completed
        self._start = {}
        if self.future.done():  # operation until purged: nothing of its request with it
            return
        try:
            results = self._read(self.params, partitions)
        except Exception:
            log.exception("reading a parked fetch failed; answering UNKNOWN_SERVER_ERROR")
            results = [FetchPartitionData(ErrorCode.UNKNOWN_SERVER_ERROR) for _ in partitions]
        self.future.set_result(results)

    def on_expiration(self) -> None:  # the timeout: on_complete already answered with what is there
        pass
