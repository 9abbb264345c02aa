"""ReplicaManager: the partitions this broker hosts, as leader or follower, and what it does with them.

It appends produced records (parking acks=-1 in the produce purgatory until the ISR has them),
serves fetches from consumers and followers (parking them in the fetch purgatory until there is
data), follows leaders through its replica fetchers, and applies the controller's LeaderAndIsr
and StopReplica decisions. Handlers never touch logs directly, and every answer is per partition,
so one bad partition never fails a whole request.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker import replication
from broker.logs import get_logger
from broker.metadata.partition_state import LeaderAndIsr
from broker.metadata.topic_names import is_valid_topic_name
from broker.replication.purgatory import DelayedOperationPurgatory
from protocol.errors import ErrorCode, KafkaError, RecordValidationError
from protocol.file_region import FileRegion
from storage.append_origin import AppendOrigin
from storage.log_dir_failure_channel import KafkaStorageError
from storage.partition_metadata import read_partition_metadata

if TYPE_CHECKING:
    from broker.replication.delayed_delete_records import DeleteRecordsPartitionStatus
    from broker.replication.delayed_fetch import (
        DelayedFetch,
        FetchParams,
        FetchPartition,
        FetchPartitionData,
    )
    from broker.replication.delayed_produce import (
        DelayedProduce,
        ProduceResult,
    )
    from broker.replication.fetch_session import FetchContext, FetchManager, FetchMetadata
    from broker.replication.fetch_session_handler import FetchSessionResponse
    from broker.replication.leader_endpoint import EpochEndOffset, LeaderEndpoint
    from broker.replication.partition import Partition
    from broker.replication.replica_alter_log_dirs import ReplicaAlterLogDirsManager
    from broker.replication.replica_fetcher import ReplicaFetcher
    from storage.log import CheckedRecords, Log
    from storage.log_config import LogConfig
    from storage.log_manager import LogManager
    from timer import Clock, SystemTimer

# FileRegions one fetch response may hold (each a descriptor until sent); further partitions'
# records are copied. A follower's usual fetch carries one or a few partitions' new batches.
MAX_REGIONS_PER_FETCH = 16
log = get_logger("kafka_sim.replica_manager")
# alter_isr(partition, new_isr) -> the accepted state once written, or None when it was not
# (lost a race, the store unreachable): Kafka's AlterPartitionManager, here a store write.
AlterIsr = Callable[["Partition", list[int]], Awaitable[LeaderAndIsr | None]]
# The data path (partitions and their logs, purgatory operations, fetch sessions, replica fetchers)
# is reached as `replication.<module>`: the package loads each module on first use (its __init__).

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2  # ListOffsets' replica ids
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(slots=True)
class OffsetLookup:
    """A ListOffsets answer for one partition."""
    error: ErrorCode = ErrorCode.NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class ReplicationSettings:
    """The replica.* and fetch session settings the replica manager follows."""
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 1_048_576
    fetch_session_cache_slots: int = 1000  # max.incremental.fetch.session.cache.slots
    high_watermark_ignores_isr: bool = False  # simulation.defect: a deliberate bug


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        timer: SystemTimer,
        clock: Clock,
        *,
        alter_isr: AlterIsr,
        leader_endpoint: Callable[[int], LeaderEndpoint],
        settings: ReplicationSettings | None = None,
        known_partition: Callable[[str, int], bool] = lambda topic, index: False,
        topic_id_of: Callable[[str], uuid.UUID | None] = lambda topic: None,
    ) -> None:
        self.broker_id = broker_id
        # The topic's current id (the metadata cache's): a Fetch v13+ naming another id for it,
        # e.g. a session's partition of a topic since deleted and recreated, is inconsistent.
        self.topic_id_of = topic_id_of
        self.log_manager = log_manager
        self.clock = clock
        self.settings = settings or ReplicationSettings()
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", timer)
        self.produce_purgatory = DelayedOperationPurgatory("Produce", timer)
        self.delete_records_purgatory = DelayedOperationPurgatory("DeleteRecords", timer)
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.controller_epoch = 0  # the newest controller heard from; older ones are refused
        self._alter_isr = alter_isr
        self._isr_changes: dict[tuple[str, int], asyncio.Task] = {}  # one in flight per partition
        # KIP-890: per (partition, producer id), the token of a transactional write being
        # verified with its coordinator; a marker for that producer voids it (Kafka's
        # VerificationStateEntry), so a write verified before its transaction ended is refused
        self.verification_guards: dict[tuple[tuple[str, int], int], object] = {}
        # Whether the cluster has the partition (this broker's metadata cache): a partition not
        # hosted here is then NOT_LEADER_OR_FOLLOWER, as Kafka's getPartitionOrError answers.
        self._known_partition = known_partition
        self._leader_endpoint = leader_endpoint
        self._parked: set[DelayedFetch | DelayedProduce] = set()
        self._replication_paused = False
        self.offline_partitions: set[tuple[str, int]] = set()  # Kafka's HostedPartition.Offline
        # Called with a partition's key whenever its records or high watermark moved, as its
        # parked fetches are checked (the share fetch purgatory, once share groups are used)
        self.record_listeners: list[Callable[[tuple[str, int]], object]] = []

    @functools.cached_property
    def fetch_manager(self) -> FetchManager:
        """The fetch sessions (Kafka's FetchManager), made by the first fetch."""
        sessions = replication.fetch_session
        return sessions.FetchManager(
            sessions.FetchSessionCache(self.settings.fetch_session_cache_slots, self.clock.now_ms))

    @functools.cached_property
    def alter_log_dirs(self) -> ReplicaAlterLogDirsManager:
        """The replica movers between this broker's log dirs, made by the first partition."""
        return replication.replica_alter_log_dirs.ReplicaAlterLogDirsManager(
            self.log_manager, lambda key: p.log if (p := self.partitions.get(key)) else None,
            self._log_swapped, self.topic_id_of, lambda key: key in self.offline_partitions,
            self._known_partition)

    # -- the controller's decisions ---------------------------------------------------------

    def _partition(self, state: LeaderAndIsr, config: LogConfig) -> Partition:
        key = (state.topic, state.partition)
        partition = self.partitions.get(key)
        if partition is None:
            topic_id = self.topic_id_of(state.topic)
            log_ = self.log_manager.get_log(*key)
            found_at_load = key in self.log_manager.found_at_load  # (made here: nothing to check)
            self.log_manager.found_at_load.discard(key)
            if log_ is not None and topic_id is not None and found_at_load and (
                    found := read_partition_metadata(log_.directory)) not in (None, topic_id):
                # A folder of a topic deleted while this broker was down, recreated under the same
                # name since: not this topic's log (Kafka treats it as stray).
                log.warning("stray log of an older topic with this name deleted", topic=state.topic,
                            partition=state.partition, its_topic_id=str(found),
                            topic_id=str(topic_id))
                self.log_manager.delete_log(*key)
                log_ = None
            if log_ is None:
                log_ = self.log_manager.create_log(*key, config, topic_id)
            partition = replication.partition.Partition(
                state.topic, state.partition, log_, self.broker_id, self.clock.now_ms,
                self._request_isr_change,
                hw_ignores_isr=self.settings.high_watermark_ignores_isr)
            self.partitions[key] = partition
            self._watch_log(key, log_)
            self.alter_log_dirs.start(key)  # a move found at start-up goes on (if there is one)
        return partition

    def _log_swapped(self, key: tuple[str, int], log_: Log) -> None:
        """A replica moved to another log dir: its partition reads and appends there now."""
        partition = self.partitions.get(key)
        if partition is not None:
            partition.log = log_
            self._watch_log(key, log_)
            self.fetch_manager.changes.mark(key)

    def _watch_log(self, key: tuple[str, int], log_: Log) -> None:
        """Fetch sessions learn of the log's changes (ChangedPartitions)."""
        log_.on_change = functools.partial(self.fetch_manager.changes.mark, key)

    def logs_to_create(self, states: list[LeaderAndIsr], configs: dict[str, LogConfig]
                       ) -> list[tuple[str, int, LogConfig, uuid.UUID | None, int | None]]:
        """The logs become_leader_or_follower would create for `states` (partitions not hosted
        yet, whose log is not here): made in a worker thread first, so that it finds them, with
        the leader epoch of those this broker is to lead (their first leader-epoch entry)."""
        return [(s.topic, s.partition, configs[s.topic], self.topic_id_of(s.topic),
                 s.leader_epoch if s.leader == self.broker_id else None)
                for s in states
                if (s.topic, s.partition) not in self.partitions
                and (s.topic, s.partition) not in self.offline_partitions
                and is_valid_topic_name(s.topic) and s.partition >= 0 and s.leader_epoch >= 0
                and s.topic in configs and self.log_manager.get_log(s.topic, s.partition) is None]

    def become_leader_or_follower(
        self, states: list[LeaderAndIsr], configs: dict[str, LogConfig]
    ) -> dict[tuple[str, int], ErrorCode]:
        """Apply LeaderAndIsr: the partitions listed become leader or follower here."""
        errors: dict[tuple[str, int], ErrorCode] = {}
        for state in states:
            key = (state.topic, state.partition)
            if key in self.offline_partitions:
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR  # its log dir failed: not hosted here
                continue
            current = self.partitions.get(key)
            if not is_valid_topic_name(state.topic) or state.partition < 0:
                # Only a forged request names these: refused one by one (the log manager's own
                # check raised, leaving the rest of the request unapplied).
                errors[key] = (ErrorCode.INVALID_TOPIC_EXCEPTION if state.partition >= 0
                               else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            if state.leader_epoch < 0 or (
                    current is not None and state.leader_epoch < current.leader_epoch):
                # Kafka applies only a leader epoch above the partition's (-1 before its first).
                errors[key] = ErrorCode.STALE_CONTROLLER_EPOCH  # an older decision: ignore it
                continue
            try:
                partition = self._partition(state, configs[state.topic])
            except KafkaStorageError:  # its log could not be made: a dir failed under it
                self.offline_partitions.add(key)
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if state.leader == self.broker_id:
                self._remove_from_fetcher(key)
                partition.make_leader(state)
            elif partition.make_follower(state) or key not in self._fetched_keys():
                self._remove_from_fetcher(key)
                if state.leader >= 0:
                    self._fetcher_for(state.leader).add_partition(*key, state.leader_epoch)
            errors[key] = ErrorCode.NONE
            # Parked requests re-check: a lost leadership answers them now (case A of both).
            self._complete_delayed(key)
        return errors

    def stop_replicas(self, keys: list[tuple[str, int]], *, delete: bool) -> None:
        for key in keys:
            self._remove_from_fetcher(key)
            self.alter_log_dirs.cancel(key)
            partition = self.partitions.pop(key, None)
            if partition is not None or delete:
                self._complete_delayed(key)
            if delete:
                self.log_manager.delete_log(*key)

    def handle_log_dir_failure(self, log_dir: str) -> list[tuple[str, int]]:
        """The partitions whose logs are in the failed `log_dir` go offline on this broker: their
        fetchers stop, parked requests on them answer now, and every later request for them gets
        KAFKA_STORAGE_ERROR. Returns them."""
        keys = [k for k, p in self.partitions.items() if p.log.log_dir == log_dir]
        for key, future in self.log_manager.future_logs().items():
            if key in keys or future.log_dir == log_dir:  # a move into or out of it ends
                self.alter_log_dirs.cancel(key)
        for key in keys:
            self._remove_from_fetcher(key)
            del self.partitions[key]
            self.offline_partitions.add(key)
            self._complete_delayed(key)
        return keys

    def _fetched_keys(self) -> set[tuple[str, int]]:
        return {k for f in self.fetchers.values() for k in f.partitions}

    def _fetcher_for(self, leader_id: int) -> ReplicaFetcher:
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = replication.replica_fetcher.ReplicaFetcher(
                self.broker_id, self.partitions, leader_id, self._leader_endpoint(leader_id),
                max_wait_ms=self.settings.replica_fetch_wait_max_ms,
                max_bytes=self.settings.replica_fetch_max_bytes,
                changes=self.fetch_manager.changes)
            if self._replication_paused:
                fetcher.pause()
            self.fetchers[leader_id] = fetcher
        return fetcher

    def _remove_from_fetcher(self, key: tuple[str, int]) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove_partition(key)

    def pause_replication(self) -> None:
        self._replication_paused = True
        for fetcher in self.fetchers.values():
            fetcher.pause()

    def resume_replication(self) -> None:
        self._replication_paused = False
        for fetcher in self.fetchers.values():
            fetcher.resume()

    @property
    def replication_paused(self) -> bool:
        return self._replication_paused

    def hosted_partition(self, topic: str, index: int) -> Partition:
        """Kafka's getPartitionOrException: KAFKA_STORAGE_ERROR for a partition on an offline
        dir, NOT_LEADER_OR_FOLLOWER for one the cluster has but this broker does not host,
        UNKNOWN_TOPIC_OR_PARTITION for one nobody has."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            if (topic, index) in self.offline_partitions:
                raise KafkaStorageError(f"partition {topic}-{index} is on an offline log dir")
            if self._known_partition(topic, index):  # not (yet, or no longer) a replica here
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition

    def leader_partition(self, topic: str, index: int) -> Partition:
        partition = self.hosted_partition(topic, index)
        if not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    def partition_with_epoch(self, topic: str, index: int, current_leader_epoch: int, *,
                             require_leader: bool = True) -> Partition:
        """Kafka's localLogWithEpochOrThrow: the client's leader epoch is checked before
        leadership, so a follower answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH to a
        stale / future epoch and NOT_LEADER_OR_FOLLOWER only to a current one."""
        partition = self.hosted_partition(topic, index)
        self._check_leader_epoch(partition, current_leader_epoch)
        if require_leader and not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    def _check_leader_epoch(self, partition: Partition, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < partition.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > partition.leader_epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def _complete_delayed(self, key: tuple[str, int]) -> None:
        self.fetch_manager.changes.mark(key)  # leadership, epoch, removal: sessions read it again
        self.produce_purgatory.check_and_complete(key)
        self._check_fetches(key)
        self.delete_records_purgatory.check_and_complete(key)

    def _check_fetches(self, key: tuple[str, int]) -> None:
        """The fetches parked on this partition: those that named it, and the narrowed ones of
        the sessions holding it (each parked under its session's one key)."""
        purgatory = self.fetch_purgatory
        purgatory.check_and_complete(key)
        for session_id in tuple(self.fetch_manager.cache.sessions_of.get(key, ())):
            purgatory.check_and_complete(replication.fetch_session.SessionWatch(session_id))
        for listener in self.record_listeners:
            listener(key)

    @property
    def isr_changes_in_flight(self) -> int:
        """ISR changes written but not yet applied (one per partition at most)."""
        return len(self._isr_changes)

    def _request_isr_change(self, partition: Partition, new_isr: list[int]) -> None:
        if partition.key not in self._isr_changes:
            self._isr_changes[partition.key] = asyncio.ensure_future(
                self._change_isr(partition, new_isr))

    async def _change_isr(self, partition: Partition, new_isr: list[int]) -> None:
        """Write the ISR change; once accepted (and the partition still led in that epoch),
        apply it: the high watermark may move and parked operations complete."""
        try:
            accepted = await self._alter_isr(partition, new_isr)
        finally:
            del self._isr_changes[partition.key]
        if (accepted is None or self.partitions.get(partition.key) is not partition
                or not partition.is_leader or partition.leader_epoch != accepted.leader_epoch):
            return
        partition.update_isr(accepted)
        partition.maybe_increment_high_watermark()
        self._complete_delayed(partition.key)
        # Followers that caught up while this change was in flight asked for nothing: ask now.
        for replica_id in partition.remote_replicas:
            if replica_id not in partition.isr:
                partition.maybe_expand_isr(replica_id)

    def maybe_shrink_isr(self) -> None:
        """Run every replica.lag.time.max.ms / 2 (Kafka's isr-expiration task)."""
        for partition in list(self.partitions.values()):
            if partition.maybe_shrink_isr(self.settings.replica_lag_time_max_ms):
                self._complete_delayed(partition.key)
            elif partition.is_leader:
                # A shrink below min.insync.replicas can fail parked acks=-1 produces.
                self.produce_purgatory.check_and_complete(partition.key)

    # -- produce ----------------------------------------------------------------------------

    def start_verification(self, key: tuple[str, int], producer_id: int) -> object:
        """A guard for a transactional write about to be verified: it holds until a marker for
        the producer lands on the partition, or the write is appended."""
        guard = self.verification_guards[(key, producer_id)] = object()
        return guard

    def end_verification(self, key: tuple[str, int], producer_id: int, guard: object) -> None:
        """Drop a guard no write will use (refused, or never appended), unless replaced since."""
        if self.verification_guards.get((key, producer_id)) is guard:
            del self.verification_guards[(key, producer_id)]

    def append_records(
        self, entries: dict[tuple[str, int], bytes | memoryview | None], acks: int = 1,
        checked: dict[tuple[str, int], CheckedRecords] | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verified: dict[tuple[str, int], tuple[int, object]] | None = None,
    ) -> dict[tuple[str, int], ProduceResult]:
        """`verified`: per partition, the producer id and guard of a write its coordinator
        confirmed (start_verification): written only while the guard holds."""
        results: dict[tuple[str, int], ProduceResult] = {}
        for key, records in entries.items():
            try:
                partition = self.leader_partition(*key)
                if not records:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no record batch in the request")
                if origin == AppendOrigin.COORDINATOR:
                    self._void_verifications(key, records)
                elif verified is not None and key in verified:
                    producer_id, guard = verified[key]
                    if self.verification_guards.pop((key, producer_id), None) is not guard:
                        raise KafkaError(ErrorCode.INVALID_TXN_STATE, "the transaction ended "
                                         "while this write to it was being verified")
                min_isr = partition.log.config.min_insync_replicas
                if acks == -1 and len(partition.isr) < min_isr:
                    raise KafkaError(
                        ErrorCode.NOT_ENOUGH_REPLICAS,
                        f"the ISR {partition.isr} is smaller than min.insync.replicas={min_isr}",
                    )
                info = partition.append_records_as_leader(
                    records, origin=origin,
                    checked=None if checked is None else checked.get(key))
            except KafkaError as exc:
                results[key] = _failed_append(exc, self.partitions.get(key))
                continue
            results[key] = replication.delayed_produce.ProduceResult(
                base_offset=info.first_offset,
                log_append_time_ms=info.log_append_time,
                log_start_offset=partition.log_start_offset,
            )
            # Followers wait for LEO growth, consumers for HW growth (HW may have moved too).
            self._check_fetches(key)
        return results

    def _void_verifications(self, key: tuple[str, int], records: bytes | memoryview) -> None:
        """A transaction marker ends its producer's transaction here: a write of that producer
        verified before it must not open a new one (a transaction nobody would ever end)."""
        for producer_id in replication.partition.marker_producer_ids(records):
            self.verification_guards.pop((key, producer_id), None)

    async def _check_off_loop(
        self, entries: dict[tuple[str, int], bytes | memoryview | None], acks: int
    ) -> tuple[dict[tuple[str, int], ProduceResult], dict[tuple[str, int], CheckedRecords]]:
        """Check compressed (or large) batches in a worker thread: inflating up to the
        decompression bound and reading every record (decoded on a log that checks keys or
        timestamps, its structure walked otherwise) must not hold the event loop. Returns the
        partitions that failed and what was found of those checked (their append then skips the
        check); everything else is checked on the loop during the append."""
        failed: dict[tuple[str, int], ProduceResult] = {}
        checked: dict[tuple[str, int], CheckedRecords] = {}
        for key, records in list(entries.items()):
            partition = self.partitions.get(key)
            if not records or partition is None or not partition.is_leader:
                continue
            log_ = partition.log
            if not log_.checks_off_loop(records):
                continue
            if acks == -1 and len(partition.isr) < partition.log.config.min_insync_replicas:
                continue  # NOT_ENOUGH_REPLICAS comes first, from append_records (Kafka's order)
            data = bytes(records)  # immutable: the thread sees exactly what will be appended
            try:
                checked[key] = await asyncio.to_thread(log_.records_checker(), data)
            except KafkaError as exc:
                failed[key] = _failed_append(exc, partition)
                continue
            entries[key] = data
        return failed, checked

    async def produce(
        self, acks: int, timeout_ms: int, entries: dict[tuple[str, int], bytes | memoryview | None],
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verified: dict[tuple[str, int], tuple[int, object]] | None = None,
    ) -> dict[tuple[str, int], ProduceResult]:
        """Append as leader and, with acks=-1, wait until the ISR has it. The transaction
        coordinator appends its markers here too (origin COORDINATOR). `verified`: as
        append_records'."""
        delayed = replication.delayed_produce
        try:
            failed, checked = await self._check_off_loop(entries, acks)
            results = failed | self.append_records(
                {k: r for k, r in entries.items() if k not in failed}, acks, checked, origin,
                verified)
        finally:
            for key, (producer_id, guard) in (verified or {}).items():
                self.end_verification(key, producer_id, guard)  # never appended
        if acks != -1:
            return results
        # Each appended partition waits until its HW covers the append: the LEO right after it.
        statuses = {
            key: delayed.ProducePartitionStatus(self.partitions[key].log_end_offset, r)
            for key, r in results.items()
            if r.error == ErrorCode.NONE
        }
        if not statuses:
            return results
        future = asyncio.get_running_loop().create_future()
        op = delayed.DelayedProduce(max(0, timeout_ms), statuses, replicas=self, future=future)
        await self._park(self.produce_purgatory, op, list(statuses), future)
        return results

    async def _park(self, purgatory: DelayedOperationPurgatory, op, keys, future) -> None:
        self._parked.add(op)

        def never_unanswered(_op) -> None:  # an op whose completion failed must still answer
            if not future.done():
                future.set_exception(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                f"{type(_op).__name__} failed to complete"))

        op.add_done_callback(never_unanswered)
        try:
            purgatory.try_complete_else_watch(op, keys)
            await future
        finally:
            self._parked.discard(op)
            if not future.done():  # the connection went away while we waited
                future.cancel()
                op.force_complete()

    # -- delete records ---------------------------------------------------------------------

    async def delete_records(
        self, timeout_ms: int, offsets: dict[tuple[str, int], int]
    ) -> dict[tuple[str, int], DeleteRecordsPartitionStatus]:
        """Move each led partition's log start offset (-1: to the high watermark), then wait until
        the ISR followed (Kafka's deleteRecordsOnLeader and DelayedDeleteRecords)."""
        delayed = replication.delayed_delete_records
        statuses: dict[tuple[str, int], DeleteRecordsPartitionStatus] = {}
        for key, offset in offsets.items():
            try:
                partition = self.leader_partition(*key)
                if "delete" not in partition.log.config.cleanup_policy.split(","):
                    raise KafkaError(ErrorCode.POLICY_VIOLATION, f"Records of partition {key} can "
                                     "not be deleted due to the configured policy")
                target = partition.high_watermark if offset == -1 else offset
                if target < 0:
                    raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} is negative")
                partition.log.increment_log_start_offset(target)
                statuses[key] = delayed.DeleteRecordsPartitionStatus(target)
            except KafkaError as exc:
                statuses[key] = delayed.DeleteRecordsPartitionStatus(-1, error=exc.code,
                                                                     acks_pending=False)
        waiting = {k: s for k, s in statuses.items() if s.acks_pending}
        if waiting:
            future = asyncio.get_running_loop().create_future()
            op = delayed.DelayedDeleteRecords(max(0, timeout_ms), waiting, replicas=self,
                                              future=future)
            await self._park(self.delete_records_purgatory, op, list(waiting), future)
        return statuses

    # -- fetch ------------------------------------------------------------------------------

    def read_from_local_log(
        self, params: FetchParams, partitions: list[FetchPartition]
    ) -> list[FetchPartitionData]:
        fetch = replication.delayed_fetch
        limit = params.max_bytes
        min_one_message = True  # KIP-74: the first batch comes back even above the limits
        # read_committed needs the records' bytes to find the aborted transactions among them
        as_region = params.zero_copy and (params.is_from_follower
                                          or params.isolation_level != fetch.READ_COMMITTED)
        regions_left = MAX_REGIONS_PER_FETCH  # each holds a descriptor until it is sent
        results = []
        for fp in partitions:
            if fp.topic_id is not None and not fp.topic:  # an id the metadata does not know
                results.append(fetch.FetchPartitionData(ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            try:
                partition = self.leader_partition(fp.topic, fp.partition)
                if fp.topic_id is not None and (
                        current := self.topic_id_of(fp.topic)) is not None and fp.topic_id != current:
                    raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID)
                self._check_leader_epoch(partition, fp.current_leader_epoch)
                if params.is_from_follower:
                    self._follower_replica_or_error(partition, params.replica_id)
            except KafkaError as exc:
                results.append(fetch.FetchPartitionData(exc.code))
                continue
            data = fetch.FetchPartitionData(
                ErrorCode.NONE,
                partition.high_watermark,
                partition.log.last_stable_offset,
                partition.log_start_offset,
            )
            data.end_offset = end = params.end_offset(partition)
            try:
                read = partition.log.read(
                    fp.fetch_offset,
                    max(0, min(fp.partition_max_bytes, limit)),
                    max_offset=end,
                    min_one_message=min_one_message,
                    as_region=as_region,
                )
                if params.isolation_level == fetch.READ_COMMITTED and not params.is_from_follower:
                    data.aborted_transactions = partition.log.aborted_transactions_in(
                        fp.fetch_offset, read.records)
            except KafkaError as exc:
                data.error = exc.code
            except Exception:  # Kafka's readFromLog: an unexpected error is this partition's alone
                log.exception("reading a partition for a fetch failed", topic=fp.topic,
                              partition=fp.partition)
                data.error = ErrorCode.UNKNOWN_SERVER_ERROR
            else:
                data.records = read.records
                if as_region and isinstance(read.records, FileRegion):
                    regions_left -= 1
                    as_region = regions_left > 0
                if read.records:
                    limit -= len(read.records)
                    min_one_message = False
            results.append(data)
        return results

    @staticmethod
    def _follower_replica_or_error(partition: Partition, replica_id: int) -> None:
        """Kafka's Partition.followerReplicaOrThrow: a replica_id that is not one of the
        partition's (remote) replicas gets NOT_LEADER_OR_FOLLOWER, before anything is read."""
        if not partition.is_remote_replica(replica_id):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Received fetch request from invalid replica {replica_id}")

    def _update_follower_fetch_state(
        self, params: FetchParams, partitions: list[FetchPartition], results: list[FetchPartitionData]
    ) -> None:
        """After the read (Kafka's Partition.fetchRecords): only a partition whose checks and read
        succeeded moves its follower's state; an erred one (not leader, fenced or unknown epoch,
        not a replica, offset out of range) leaves it as it was."""
        for fp, data in zip(partitions, results, strict=True):
            if data.error != ErrorCode.NONE:
                continue
            partition = self.partitions.get((fp.topic, fp.partition))
            if partition is None or not partition.is_leader:
                continue
            if partition.update_follower_fetch_state(params.replica_id, fp.fetch_offset,
                                                     fp.log_start_offset):
                # The follower's fetch raised the HW: it may take it home at once (Kafka's
                # response carries the HW of the read; the records read are the same either way).
                data.high_watermark = partition.high_watermark
                data.last_stable_offset = partition.log.last_stable_offset
                self._complete_delayed(partition.key)
            # Its log start offset may have moved: DeleteRecords waiting on it may be done.
            self.delete_records_purgatory.check_and_complete(partition.key)

    async def fetch_messages(
        self, params: FetchParams, partitions: list[FetchPartition],
        context: FetchContext | None = None,
    ) -> list[FetchPartitionData]:
        """Read (parking in the fetch purgatory when there is too little); the results follow
        `distinct_partitions(partitions)`: a partition listed twice is read and answered once.
        A narrowed incremental fetch (its `context`) waits on its whole session, but checks and,
        when it completes, reads only what changed since it read (the results then follow
        `context.partitions`)."""
        fetch = replication.delayed_fetch
        partitions = fetch.distinct_partitions(partitions)
        results = self.read_from_local_log(params, partitions)
        if params.is_from_follower:  # once, on the first read: not again when read from purgatory
            self._update_follower_fetch_state(params, partitions, results)
        if (
            params.max_wait_ms <= 0
            or sum(len(r.records) for r in results) >= params.min_bytes
            or any(r.error for r in results)
        ):
            return results
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if context is not None and context.narrowed:
            keys = [context.session_watch()]
            changes = self.fetch_manager.changes

            def read_changed(params: FetchParams, _waited: list[FetchPartition]
                             ) -> list[FetchPartitionData]:
                return self.read_from_local_log(params, context.renarrow(changes))

            op = fetch.DelayedFetch(params, [], replicas=self, read=read_changed, future=future,
                                    candidates=lambda: context.changed_since_read(changes))
        else:
            keys = [(fp.topic, fp.partition) for fp in partitions]
            op = fetch.DelayedFetch(params, partitions, replicas=self,
                                    read=self.read_from_local_log, future=future)
        if not keys:
            return results
        # While the cluster's clock is frozen (`ctl clock freeze`), max_wait_ms is the client's
        # long poll in real time: on broker time it would hold the client's connection, and the
        # group requests queued behind the fetch on it, until time is advanced.
        real_deadline = loop.call_later(params.max_wait_ms / 1000, op.run) \
            if getattr(self.clock, "frozen", False) else None
        try:
            await self._park(self.fetch_purgatory, op, keys, future)
        finally:
            if real_deadline is not None:
                real_deadline.cancel()
        return future.result()

    async def fetch_in_session(
        self, params: FetchParams, metadata: FetchMetadata, partitions: list[FetchPartition],
        forgotten: list[tuple[str, int]] | list[tuple[uuid.UUID, int]],
        readable: Callable[[list[FetchPartition]], set[str]] | None = None,
        *, uses_topic_ids: bool = False, throttle: Callable[[int], int] | None = None,
    ) -> FetchSessionResponse:
        """A Fetch with its session fields (KIP-227): full, incremental or sessionless, read and
        parked as `fetch_messages`, answered with the partitions the session says to carry.
        `readable` (an authorizer's) names the topics of the context's partitions it may read; the
        others are answered TOPIC_AUTHORIZATION_FAILED without being read. `throttle` (a fetch
        quota's) gets the response's size and returns the throttle time it earns."""
        fetch, sessions = replication.delayed_fetch, replication.fetch_session
        answer = replication.fetch_session_handler.FetchSessionResponse
        context = self.fetch_manager.new_context(metadata, fetch.distinct_partitions(partitions),
                                                 forgotten, is_follower=params.is_from_follower,
                                                 uses_topic_ids=uses_topic_ids)
        if context.error != ErrorCode.NONE:
            return answer(context.error, sessions.INVALID_SESSION_ID)
        if readable is None:
            # Narrowed, only what changed is read; nothing to answer yet means every partition
            # of the session is watched while the fetch waits (and read again when it completes).
            results = await self.fetch_messages(params, context.partitions, context=context)
        else:
            allowed = readable(context.widen())
            # An unknown topic id is answered UNKNOWN_TOPIC_ID by the read, not authorized first.
            authorized = [fp.topic in allowed or (fp.topic_id is not None and not fp.topic)
                          for fp in context.partitions]
            read = iter(await self.fetch_messages(
                params, [fp for fp, ok in zip(context.partitions, authorized, strict=True) if ok]))
            results = [next(read) if ok
                       else fetch.FetchPartitionData(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                       for ok in authorized]
        self.fetch_manager.partitions_read += len(context.partitions)
        # A fetch quota's throttle (given the response's size) answers no partitions and leaves
        # the session as it was; a full fetch opens no session (Kafka's getThrottledResponse)
        if throttle is not None and throttle(context.response_size(results)) > 0:
            session = context.session if context.kind == "incremental" else None
            return answer(ErrorCode.NONE, session.id if session is not None
                          else sessions.INVALID_SESSION_ID)
        answered = context.respond(results)
        return answer(ErrorCode.NONE, context.session_id, {fp.key: data for fp, data in answered})

    def complete_parked_fetch(self, replica_id: int) -> None:
        """Answer a follower's parked fetch now (it follows new partitions: their first fetch
        need not wait for replica.fetch.wait.max.ms), its fetch session going on."""
        for op in list(self._parked):
            if (isinstance(op, replication.delayed_fetch.DelayedFetch)
                    and op.params.replica_id == replica_id):
                op.force_complete()

    def complete_parked(self) -> None:
        """Answer every parked request with what is there now (shutdown)."""
        for op in list(self._parked):
            op.force_complete()

    async def shutdown(self) -> None:
        if "alter_log_dirs" in vars(self):  # made only if a partition was ever hosted
            await self.alter_log_dirs.shutdown()
        self.complete_parked()
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()

    # -- offsets ----------------------------------------------------------------------------

    async def offset_for_timestamp(
        self, topic: str, index: int, timestamp: int, current_leader_epoch: int, isolation_level: int,
        replica_id: int = CONSUMER_REPLICA_ID,
    ) -> OffsetLookup:
        """ListOffsets for one partition, as Kafka's Partition.fetchOffsetForTimestamp. Only the
        debugging replica id (-2) may be answered by a follower; a request from a consumer (-1)
        sees offsets below the high watermark (read_committed: the last stable offset), others
        below the log end offset."""
        try:
            partition = self.partition_with_epoch(
                topic, index, current_leader_epoch,
                require_leader=replica_id != DEBUGGING_REPLICA_ID)
        except KafkaError as exc:
            return OffsetLookup(exc.code)
        log_ = partition.log
        epoch = partition.leader_epoch
        from_consumer = replica_id == CONSUMER_REPLICA_ID
        if not from_consumer:
            fetchable = log_.log_end_offset
        elif isolation_level == replication.delayed_fetch.READ_COMMITTED:
            fetchable = log_.last_stable_offset
        else:
            fetchable = partition.high_watermark
        # A new leader's high watermark may lag the start of its epoch until the followers
        # report: offsets are then not available to consumers yet (OFFSET_NOT_AVAILABLE).
        lagging = from_consumer and partition.is_leader and \
            self._epoch_start_offset(partition) > partition.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            if lagging:
                return OffsetLookup(ErrorCode.OFFSET_NOT_AVAILABLE)
            return OffsetLookup(offset=fetchable, leader_epoch=epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            # The epoch of the log start offset when the epoch cache covers it (Kafka's rule).
            entries = log_.leader_epoch_cache.epoch_entries()
            first_epoch = entries[0].epoch if entries and \
                entries[0].start_offset <= log_.log_start_offset else -1
            return OffsetLookup(offset=log_.log_start_offset, leader_epoch=first_epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:  # no tiered storage here
            return OffsetLookup(offset=-1, leader_epoch=-1)
        if timestamp < 0 and timestamp != MAX_TIMESTAMP:  # the handler refuses other negatives
            return OffsetLookup(ErrorCode.UNSUPPORTED_VERSION)
        try:  # records are decoded here: a malformed stored record fails this partition only
            found = await (partition.offset_of_max_timestamp() if timestamp == MAX_TIMESTAMP
                           else partition.fetch_offset_by_timestamp(timestamp))
        except KafkaError as exc:
            return OffsetLookup(exc.code)
        if self.partitions.get(partition.key) is not partition or not partition.is_leader \
                or partition.leader_epoch != epoch:  # it changed while a batch was decoded
            return OffsetLookup(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if found is None or found[0] >= fetchable:
            return OffsetLookup(ErrorCode.OFFSET_NOT_AVAILABLE) if lagging else OffsetLookup()
        offset, ts, batch_epoch = found
        # The epoch is the found record's batch's, as Kafka answers (not the current one).
        return OffsetLookup(timestamp=ts, offset=offset, leader_epoch=max(batch_epoch, -1))

    @staticmethod
    def _epoch_start_offset(partition: Partition) -> int:
        """Where the leader's current epoch starts in its log (Kafka's leaderEpochStartOffsetOpt)."""
        return next((start for epoch, start in partition.log.leader_epoch_cache.epoch_entries()
                     if epoch == partition.leader_epoch), -1)

    def last_offset_for_leader_epoch(
        self, topic: str, index: int, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset:
        """OffsetForLeaderEpoch: where `leader_epoch` ends in the leader's log."""
        answer = replication.leader_endpoint.EpochEndOffset
        try:
            partition = self.partition_with_epoch(topic, index, current_leader_epoch)
        except KafkaError as exc:
            return answer(exc.code)
        epoch, end_offset = partition.log.end_offset_for_epoch(leader_epoch)
        return answer(ErrorCode.NONE, epoch, end_offset)


# Errors Kafka's appendToLocalLog answers with the log start offset -1: those it catches by name
# (the partition unknown, not led, its dir offline, the records corrupt or too large); any other
# refusal of the log (invalid records, producer state, NOT_ENOUGH_REPLICAS) carries the
# partition's log start offset.
_NO_LOG_START_OFFSET = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_TOPIC_EXCEPTION,
})


def _failed_append(exc: KafkaError, partition: Partition | None) -> ProduceResult:
    """A refused append's answer; records refused one by one (KIP-467) carry their indexes."""
    log_start_offset = -1 if partition is None or exc.code in _NO_LOG_START_OFFSET \
        else partition.log_start_offset
    return replication.delayed_produce.ProduceResult(
        exc.code, error_message=exc.message or None, log_start_offset=log_start_offset,
        record_errors=exc.record_errors if isinstance(exc, RecordValidationError) else [])
