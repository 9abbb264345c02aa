"""ReplicaManager: the partitions this broker hosts, appends to them, reads from them, parked fetches.

Handlers never touch logs directly; they ask the ReplicaManager, which answers per partition with
an error code where something is wrong, so one bad partition never fails a whole request.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from broker.delayed_fetch import DelayedFetch, FetchParams, FetchPartition, FetchPartitionData
from broker.partition import Partition
from broker.purgatory import DelayedOperationPurgatory
from protocol.errors import ErrorCode, KafkaError
from storage.log_config import LogConfig
from storage.log_manager import LogManager
from timer import SystemTimer

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(slots=True)
class OffsetLookup:
    error: ErrorCode = ErrorCode.NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, timer: SystemTimer) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", timer)
        self._parked: set[DelayedFetch] = set()

    # -- partitions -------------------------------------------------------------------------

    def make_leader(self, topic: str, index: int, config: LogConfig, leader_epoch: int = 0) -> None:
        log = self.log_manager.get_log(topic, index) or self.log_manager.create_log(
            topic, index, config
        )
        partition = Partition(
            topic, index, log, self.broker_id, leader_epoch, [self.broker_id], [self.broker_id]
        )
        # A new leader moves the HW to the ISR's smallest LEO; alone in the ISR, to its own LEO
        # (after a crash the checkpointed HW can lag what was acknowledged).
        partition.maybe_increment_high_watermark()
        self.partitions[(topic, index)] = partition

    def update_config(self, topic: str, config: LogConfig) -> None:
        self.log_manager.update_config(topic, config)

    def delete_partitions(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[0] == topic]:
            del self.partitions[key]
            self.log_manager.delete_log(*key)
            # Parked fetches on a deleted partition answer now (case A of DelayedFetch).
            self.fetch_purgatory.check_and_complete(key)

    def leader_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if partition.leader_id != self.broker_id:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    def _check_leader_epoch(self, partition: Partition, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < partition.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > partition.leader_epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    # -- produce ----------------------------------------------------------------------------

    def append_records(
        self, entries: dict[tuple[str, int], bytes | memoryview | None]
    ) -> dict[tuple[str, int], ProduceResult]:
        results: dict[tuple[str, int], ProduceResult] = {}
        for key, records in entries.items():
            try:
                partition = self.leader_partition(*key)
                if not records:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batch in the request")
                info = partition.append_records_as_leader(records)
            except KafkaError as exc:
                results[key] = ProduceResult(exc.code, error_message=exc.message or None)
                continue
            results[key] = ProduceResult(
                base_offset=info.first_offset,
                log_append_time_ms=info.log_append_time,
                log_start_offset=partition.log_start_offset,
            )
            self.fetch_purgatory.check_and_complete(key)
        return results

    # -- fetch ------------------------------------------------------------------------------

    def _end_offset(self, params: FetchParams, partition: Partition) -> int:
        """Followers may read up to the log end offset, consumers up to the high watermark."""
        return partition.log_end_offset if params.is_from_follower else partition.high_watermark

    def bytes_available(self, params: FetchParams, fp: FetchPartition) -> int | None:
        """Bytes a parked fetch could read now; None when it must answer at once (an error)."""
        partition = self.partitions.get((fp.topic, fp.partition))
        if partition is None or partition.leader_id != self.broker_id:
            return None
        end = self._end_offset(params, partition)
        if fp.fetch_offset > end or fp.fetch_offset < partition.log_start_offset:
            return None
        if fp.fetch_offset == end:
            return 0
        data = partition.log.read(
            fp.fetch_offset, max(fp.partition_max_bytes, 1), max_offset=end, min_one_message=True
        )
        return len(data.records)

    def read_from_local_log(
        self, params: FetchParams, partitions: list[FetchPartition]
    ) -> list[FetchPartitionData]:
        limit = params.max_bytes
        min_one_message = True  # KIP-74: the first batch comes back even above the limits
        results = []
        for fp in partitions:
            try:
                partition = self.leader_partition(fp.topic, fp.partition)
                self._check_leader_epoch(partition, fp.current_leader_epoch)
            except KafkaError as exc:
                results.append(FetchPartitionData(exc.code))
                continue
            data = FetchPartitionData(
                ErrorCode.NONE,
                partition.high_watermark,
                partition.high_watermark,  # no transactions: last stable offset = HW
                partition.log_start_offset,
            )
            try:
                read = partition.log.read(
                    fp.fetch_offset,
                    max(0, min(fp.partition_max_bytes, limit)),
                    max_offset=self._end_offset(params, partition),
                    min_one_message=min_one_message,
                )
            except KafkaError as exc:
                data.error = exc.code
            else:
                data.records = read.records
                if read.records:
                    limit -= len(read.records)
                    min_one_message = False
            results.append(data)
        return results

    async def fetch_messages(
        self, params: FetchParams, partitions: list[FetchPartition]
    ) -> list[FetchPartitionData]:
        results = self.read_from_local_log(params, partitions)
        bytes_read = sum(len(r.records) for r in results)
        if (
            params.max_wait_ms <= 0
            or not partitions
            or bytes_read >= params.min_bytes
            or any(r.error for r in results)
        ):
            return results
        future = asyncio.get_running_loop().create_future()
        op = DelayedFetch(
            params,
            partitions,
            bytes_available=self.bytes_available,
            read=self.read_from_local_log,
            future=future,
        )
        self._parked.add(op)
        try:
            keys = [(fp.topic, fp.partition) for fp in partitions]
            self.fetch_purgatory.try_complete_else_watch(op, keys)
            return await future
        finally:
            self._parked.discard(op)
            if not future.done():  # the connection was cancelled while we waited
                future.cancel()
                op.force_complete()

    def complete_parked(self) -> None:
        """Answer every parked fetch with what is there now (graceful shutdown)."""
        for op in list(self._parked):
            op.force_complete()

    # -- list offsets -----------------------------------------------------------------------

    def offset_for_timestamp(
        self, topic: str, index: int, timestamp: int, current_leader_epoch: int, isolation_level: int
    ) -> OffsetLookup:
        try:
            partition = self.leader_partition(topic, index)
            self._check_leader_epoch(partition, current_leader_epoch)
        except KafkaError as exc:
            return OffsetLookup(exc.code)
        log = partition.log
        epoch = partition.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
            return OffsetLookup(offset=partition.high_watermark, leader_epoch=epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return OffsetLookup(offset=log.log_start_offset, leader_epoch=epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:  # no tiered storage here
            return OffsetLookup(offset=-1, leader_epoch=-1)
        if timestamp == MAX_TIMESTAMP:
            found = log.max_timestamp_and_offset()
        elif timestamp < 0:
            return OffsetLookup(ErrorCode.INVALID_REQUEST)
        else:
            found = log.fetch_offset_by_timestamp(timestamp)
        if found is None or found[0] >= partition.high_watermark:
            return OffsetLookup()
        offset, ts = found
        return OffsetLookup(timestamp=ts, offset=offset, leader_epoch=epoch)
