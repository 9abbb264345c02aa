"""GroupMetadataManager: which `__consumer_offsets` partitions this broker coordinates, the groups
and offsets they hold in memory, and their records in the log (append on change, load on election).

A group belongs to partition `abs(hashCode(group_id)) % partitions`, with Java's String.hashCode,
so a group lands where Kafka would put it. Every change is a record appended with acks=-1 through
the ReplicaManager; the in-memory view follows only once the ISR has it. On becoming leader of a
partition its log is read from the start (later records win, a null value deletes); until then
requests for its groups get COORDINATOR_LOAD_IN_PROGRESS. A load that fails is logged and leaves
the partition neither loading nor owned, so its groups get NOT_COORDINATOR (Kafka's coordinator
runtime puts a failed load in the FAILED state) and clients look for the coordinator again; a new
election loads it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from broker.coordinator.group.consumer_group import (
    ConsumerGroupRecords,
    replay_consumer_group_record,
)
from broker.coordinator.group.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata
from broker.coordinator.group.member import MemberMetadata
from broker.logs import get_logger
from broker.metadata.coordinator_keys import java_string_hash, kafka_abs
from broker.metadata.topic_names import OFFSETS_TOPIC
from protocol import group_records as gr
from protocol.errors import ErrorCode
from protocol.records import decode_batch, encode_batch, iter_batches
from protocol.transaction_records import ControlType, read_control_type
from storage.append_origin import AppendOrigin

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.metadata_cache import MetadataCache
    from broker.replication.replica_manager import ReplicaManager

log = get_logger("kafka_sim.group_manager")
LOAD_CHUNK_BYTES = 1 << 20

# Append errors as the coordinator reports them (Kafka's mapping in storeGroup / storeOffsets).
APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


# producer id -> (group, partition) -> offset, for transactions whose marker has not been read yet
PendingTxnOffsets = dict[int, dict[tuple[str, tuple[str, int]], OffsetAndMetadata]]


class GroupMetadataManager:
    def __init__(self, config: BrokerConfig, broker_id: int, replica_manager: ReplicaManager,
                 cache: MetadataCache, time_ms: Callable[[], int],
                 on_group_loaded: Callable[[GroupMetadata], None],
                 on_group_unloaded: Callable[[GroupMetadata], None],
                 on_consumer_groups_loaded: Callable[[ConsumerGroupRecords], None]) -> None:
        self.config = config
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.cache = cache
        self.time_ms = time_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.owned: set[int] = set()  # loaded partitions
        self.loading: dict[int, asyncio.Task | None] = {}
        self.failed: set[int] = set()  # partitions whose load failed: NOT_COORDINATOR
        # Markers that reached a partition while it loads (its load may have read the log before
        # them): (producer id, commit), applied once its groups are built.
        self._markers_during_load: dict[int, list[tuple[int, bool]]] = {}
        self._on_group_loaded = on_group_loaded
        self._on_group_unloaded = on_group_unloaded
        self._on_consumer_groups_loaded = on_consumer_groups_loaded

    # -- partitions -------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        topic = self.cache.topic(OFFSETS_TOPIC)
        return topic.num_partitions if topic else self.config["offsets.topic.num.partitions"]

    def partition_for(self, group_id: str) -> int:
        return kafka_abs(java_string_hash(group_id)) % self.num_partitions

    def is_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading

    def is_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned

    def on_elected(self, partition: int) -> None:
        if partition in self.owned or partition in self.loading:
            return
        self.failed.discard(partition)
        try:
            task = asyncio.get_running_loop().create_task(self._load(partition))
        except RuntimeError:  # no loop (unit tests calling in directly): load at once
            self.loading[partition] = None
            self._load_or_fail(partition)
            return
        self.loading[partition] = task

    def on_resigned(self, partition: int) -> None:
        self._markers_during_load.pop(partition, None)
        task = self.loading.pop(partition, None)
        if task is not None:
            task.cancel()
        self.owned.discard(partition)
        self.failed.discard(partition)
        for group in [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]:
            del self.groups[group.group_id]
            self._on_group_unloaded(group)
        log.info("unloaded offsets partition", broker_id=self.broker_id, partition=partition)

    def shutdown(self) -> None:
        for partition in list(self.owned | set(self.loading) | self.failed):
            self.on_resigned(partition)

    # -- loading ----------------------------------------------------------------------------

    async def _load(self, partition: int) -> None:
        """Kafka loads in its scheduler thread; here each chunk of the log is read on the loop
        (the log has no lock, and the loop is the only thread that changes it) and decoded and
        replayed in a worker thread, so a large partition never holds the loop for long."""
        await asyncio.sleep(0)  # answer LOAD_IN_PROGRESS until the log has been read
        try:
            groups: dict[str, gr.GroupMetadataRecord] = {}
            offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]] = {}
            pending: PendingTxnOffsets = {}
            consumer: ConsumerGroupRecords = {}
            for data in self._chunks(partition):
                await asyncio.to_thread(self._replay_chunk, data, groups, offsets, pending,
                                        consumer)
            self._finish_load(partition, groups, offsets, pending, consumer)
        except Exception:
            self._load_failed(partition)

    def _load_or_fail(self, partition: int) -> None:
        try:
            self._load_now(partition)
        except Exception:
            self._load_failed(partition)

    def _load_failed(self, partition: int) -> None:
        log.exception("loading offsets partition failed; its groups answer NOT_COORDINATOR",
                      broker_id=self.broker_id, partition=partition)
        self.loading.pop(partition, None)
        self.failed.add(partition)

    def _load_now(self, partition: int) -> None:
        """Read and replay the whole partition at once (no loop to hand work to)."""
        groups: dict[str, gr.GroupMetadataRecord] = {}
        offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]] = {}
        pending: PendingTxnOffsets = {}
        consumer: ConsumerGroupRecords = {}
        for data in self._chunks(partition):
            self._replay_chunk(data, groups, offsets, pending, consumer)
        self._finish_load(partition, groups, offsets, pending, consumer)

    def _chunks(self, partition: int) -> Iterator[bytes]:
        """The partition's batches from its log start to the log end offset of the load's start, at
        most LOAD_CHUNK_BYTES at a time (one batch when larger); read where it is iterated."""
        rm_partition = self.replica_manager.partitions.get((OFFSETS_TOPIC, partition))
        if rm_partition is not None:
            yield from rm_partition.log.chunks(LOAD_CHUNK_BYTES)

    @classmethod
    def _replay_chunk(cls, data: bytes, groups: dict, offsets: dict,
                      pending: PendingTxnOffsets, consumer: ConsumerGroupRecords) -> None:
        """Decode one chunk into `groups` and `offsets` (the load's own: safe in a worker thread).
        A transaction's offsets wait in `pending` for its producer's marker: a commit applies
        them, an abort drops them; those still waiting at the end belong to an open transaction."""
        for pos, header in iter_batches(data):
            records = decode_batch(data, pos)[1]
            if header.is_control:
                for record in records:
                    control = read_control_type(record.key)
                    if control is None:
                        continue
                    for (group, tp), om in pending.pop(header.producer_id, {}).items():
                        current = offsets.get(group, {}).get(tp)
                        if control == ControlType.COMMIT and (
                                current is None or current.append_offset < om.append_offset):
                            offsets.setdefault(group, {})[tp] = om
                continue
            if header.is_transactional:
                for record in records:
                    decoded = gr.decode_record(record.key, record.value) if record.key else None
                    if isinstance(decoded, gr.OffsetCommitRecord) and decoded.value is not None:
                        pending.setdefault(header.producer_id, {})[
                            (decoded.group, (decoded.topic, decoded.partition))] = \
                            cls._offset(decoded.value, record.offset)
                continue
            for record in records:
                cls._replay(record, groups, offsets, consumer)

    def _finish_load(self, partition: int, groups: dict[str, gr.GroupMetadataRecord],
                     offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]],
                     pending: PendingTxnOffsets | None = None,
                     consumer: ConsumerGroupRecords | None = None) -> None:
        """Build the partition's groups, and only then own them: a failure on the way leaves
        nothing half-loaded."""
        by_group: dict[str, dict[int, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        for producer_id, entries in (pending or {}).items():
            for (group_id, tp), om in entries.items():
                by_group.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = om
        built = [self._build_group(group_id, groups.get(group_id), offsets.get(group_id, {}),
                                   by_group.get(group_id, {}))
                 for group_id in set(groups) | set(offsets) | set(by_group)]
        self.loading.pop(partition, None)
        self.owned.add(partition)
        for group in built:
            if group is not None:
                self.groups[group.group_id] = group
                self._on_group_loaded(group)
        if consumer:
            self._on_consumer_groups_loaded(consumer)
        for producer_id, commit in self._markers_during_load.pop(partition, []):
            self.complete_pending_txn_offsets(partition, producer_id, commit)
        log.info("loaded offsets partition", broker_id=self.broker_id, partition=partition,
                 groups=len(groups), offsets=sum(len(o) for o in offsets.values()))

    @staticmethod
    def _replay(record, groups: dict, offsets: dict, consumer: ConsumerGroupRecords) -> None:
        if record.key is None:
            return
        decoded = gr.decode_record(record.key, record.value)
        if isinstance(decoded, gr.ConsumerGroupRecord):
            replay_consumer_group_record(decoded, consumer)
            return
        if isinstance(decoded, gr.OffsetCommitRecord):
            v = decoded.value
            offsets.setdefault(decoded.group, {})[(decoded.topic, decoded.partition)] = None if v is None \
                else GroupMetadataManager._offset(v, record.offset)
        elif isinstance(decoded, gr.GroupMetadataRecord):
            groups[decoded.group] = decoded

    @staticmethod
    def _offset(v, append_offset: int) -> OffsetAndMetadata:
        return OffsetAndMetadata(v.offset, v.get("leader_epoch", -1), v.metadata,
                                 v.commit_timestamp,
                                 v.expire_timestamp if v.get("expire_timestamp", -1) >= 0 else None,
                                 append_offset)

    def _build_group(self, group_id: str, record: gr.GroupMetadataRecord | None,
                     offsets: dict[tuple[str, int], OffsetAndMetadata | None],
                     pending: dict[int, dict[tuple[str, int], OffsetAndMetadata]],
                     ) -> GroupMetadata | None:
        live_offsets = {k: v for k, v in offsets.items() if v is not None}
        value = record.value if record is not None else None
        if value is None and not live_offsets and not pending:
            return None
        group = GroupMetadata(group_id, current_state_timestamp=self.time_ms())
        group.offsets = live_offsets
        group.pending_txn_offsets = pending
        if value is None:
            return group
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        ts = value.get("current_state_timestamp", -1)
        group.current_state_timestamp = ts if ts >= 0 else None
        for m in value.members:
            group.add(MemberMetadata(
                m.member_id, m.get("group_instance_id"), m.client_id, m.client_host,
                m.get("rebalance_timeout", m.session_timeout), m.session_timeout,
                group.protocol_type or "", [(value.protocol or "", m.subscription)], m.assignment))
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    # -- writing ----------------------------------------------------------------------------

    async def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                      producer: tuple[int, int] | None = None) -> ErrorCode:
        return (await self._append_at(group_id, records, producer))[0]

    async def append_records(self, group_id: str,
                             records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """A KIP-848 group's records, written with acks=-1 (the coordinator's error codes)."""
        return await self._append(group_id, records)

    async def _append_at(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                         producer: tuple[int, int] | None = None) -> tuple[ErrorCode, int]:
        """Append with acks=-1; the error and the offset of the first record. `producer` (id,
        epoch) makes it a transactional batch, as Kafka writes a TxnOffsetCommit."""
        now = self.time_ms()
        if producer is None:
            batch = encode_batch([(k, v, [], now) for k, v in records])
        else:
            batch = encode_batch([(k, v, [], now) for k, v in records], producer_id=producer[0],
                                 producer_epoch=producer[1], is_transactional=True)
        key = (OFFSETS_TOPIC, self.partition_for(group_id))
        results = await self.replica_manager.produce(
            -1, self.config["offsets.commit.timeout.ms"], {key: batch},
            origin=AppendOrigin.COORDINATOR)
        error = results[key].error
        return APPEND_ERRORS.get(error, error), results[key].base_offset

    def group_value(self, group: GroupMetadata, assignment: dict[str, bytes]) -> bytes:
        return gr.group_metadata_value({
            "protocol_type": group.protocol_type or "",
            "generation": group.generation_id,
            "protocol": group.protocol_name,
            "leader": group.leader_id,
            "current_state_timestamp": group.current_state_timestamp or -1,
            "members": [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms, "session_timeout": m.session_timeout_ms,
                "subscription": m.metadata(group.protocol_name),
                "assignment": assignment.get(m.member_id, b""),
            } for m in group.members.values()],
        })

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> ErrorCode:
        error = await self._append(group.group_id, [
            (gr.group_metadata_key(group.group_id), self.group_value(group, assignment))])
        return ErrorCode.UNKNOWN_SERVER_ERROR if error == ErrorCode.INVALID_COMMIT_OFFSET_SIZE else error

    async def store_offsets(
        self, group: GroupMetadata, offsets: dict[tuple[str, int], OffsetAndMetadata],
        producer: tuple[int, int] | None = None,
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit; with a (producer id, epoch), TxnOffsetCommit: written as the producer's
        transactional records and held as pending until its transaction's marker
        (complete_pending_txn_offsets)."""
        max_metadata = self.config["offset.metadata.max.bytes"]
        errors = {tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp, om in offsets.items()
                  if om.metadata is not None and len(om.metadata.encode()) > max_metadata}
        valid = {tp: om for tp, om in offsets.items() if tp not in errors}
        if valid:
            error, base = await self._append_at(group.group_id, [
                (gr.offset_commit_key(group.group_id, t, p),
                 gr.offset_commit_value(om.offset, om.leader_epoch, om.metadata or "",
                                        om.commit_timestamp,
                                        -1 if om.expire_timestamp is None else om.expire_timestamp))
                for (t, p), om in valid.items()], producer)
            if error == ErrorCode.NONE:
                for i, om in enumerate(valid.values()):
                    om.append_offset = base + i
                if producer is None:
                    group.offsets.update(valid)
                else:
                    group.pending_txn_offsets.setdefault(producer[0], {}).update(valid)
            errors.update(dict.fromkeys(valid, error))
        return errors

    def complete_pending_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's marker reached this offsets partition: its groups there apply (commit)
        or drop (abort) what the producer committed in the transaction."""
        if partition in self.loading:
            self._markers_during_load.setdefault(partition, []).append((producer_id, commit))
            return
        for group in list(self.groups.values()):
            if producer_id in group.pending_txn_offsets \
                    and self.partition_for(group.group_id) == partition:
                group.complete_pending_txn_offsets(producer_id, commit)

    async def cleanup_group_metadata(
        self, groups: list[GroupMetadata],
        selector: Callable[[GroupMetadata], list[tuple[str, int]]],
    ) -> int:
        """Remove the offsets `selector` picks; a group left Empty without offsets dies. Writes the
        tombstones; returns how many offsets were removed."""
        removed = 0
        for group in groups:
            gone = selector(group)
            for tp in gone:
                group.offsets.pop(tp, None)
            tombstones: list[tuple[bytes, bytes | None]] = [
                (gr.offset_commit_key(group.group_id, t, p), None) for t, p in gone]
            if group.is_(GroupState.EMPTY) and not group.offsets and not group.pending_txn_offsets:
                group.transition_to(GroupState.DEAD, self.time_ms())
            if group.is_(GroupState.DEAD):
                if self.groups.get(group.group_id) is group:
                    del self.groups[group.group_id]
                tombstones.append((gr.group_metadata_key(group.group_id), None))
            removed += len(gone)
            if tombstones and self.is_local(group.group_id):
                error = await self._append(group.group_id, tombstones)
                if error != ErrorCode.NONE:
                    log.warning("writing tombstones failed", group=group.group_id, error=error.name)
        return removed
