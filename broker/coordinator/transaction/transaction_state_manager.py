"""TransactionStateManager: the `__transaction_state` partitions this broker leads, the transactional
ids they hold in memory, and their records in the log (Kafka's TransactionStateManager).

An id belongs to partition `abs(hashCode(transactional_id)) % partitions`, as a group does in
`__consumer_offsets`. The coordinator epoch of a partition is its leader epoch: markers carry it, so
a partition leader can tell a deposed coordinator's late marker. Every transition is appended with
acks=-1 and applied only once the ISR has it; a failed append drops the pending transition. On
election the log is read from the start (the latest record of an id wins, a tombstone removes it);
until then the ids of that partition answer COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from broker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TxnTransitMetadata,
)
from broker.logs import get_logger
from broker.metadata.coordinator_keys import java_string_hash, kafka_abs
from broker.metadata.topic_names import TRANSACTION_STATE_TOPIC
from protocol import transaction_records as tr
from protocol.errors import ErrorCode
from protocol.records import decode_batch, encode_batch, iter_batches

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.metadata_cache import MetadataCache
    from broker.replication.replica_manager import ReplicaManager

log = get_logger("kafka_sim.transaction_state")
LOAD_CHUNK_BYTES = 1 << 20
APPEND_TIMEOUT_MS = 5000  # Kafka's transaction.state.log... request.timeout for its own appends

# Append errors as the coordinator answers them (Kafka's mapping in appendTransactionToLog).
APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}

# Called once a partition is loaded: (partition, coordinator epoch, its transactions).
OnLoaded = Callable[[int, int, list[TransactionMetadata]], None]


class TransactionStateManager:
    def __init__(self, config: BrokerConfig, broker_id: int, replica_manager: ReplicaManager,
                 cache: MetadataCache, on_loaded: OnLoaded) -> None:
        self.config = config
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.cache = cache
        self.transactions: dict[str, TransactionMetadata] = {}
        self.owned: dict[int, int] = {}  # loaded partition -> coordinator epoch
        self.loading: dict[int, asyncio.Task | None] = {}
        self._loading_epochs: dict[int, int] = {}
        self._on_loaded = on_loaded

    # -- partitions -------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        topic = self.cache.topic(TRANSACTION_STATE_TOPIC)
        return topic.num_partitions if topic else self.config["transaction.state.log.num.partitions"]

    def partition_for(self, transactional_id: str) -> int:
        return kafka_abs(java_string_hash(transactional_id)) % self.num_partitions

    def status(self, transactional_id: str) -> ErrorCode | None:
        """Why this broker cannot answer for the id now (None: it can)."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        return self.owned.get(self.partition_for(transactional_id))

    def owned_transactions(self) -> list[TransactionMetadata]:
        return [t for t in self.transactions.values()
                if self.partition_for(t.transactional_id) in self.owned]

    def on_elected(self, partition: int, coordinator_epoch: int) -> None:
        if partition in self.owned or partition in self._loading_epochs:
            # Still the leader, in a newer leader epoch: as Kafka (which calls onElection only
            # for a new leader), the coordinator goes on with its state and epoch. Loading again
            # would read records not yet replicated as if written, and drop what is in flight.
            return
        self._loading_epochs[partition] = coordinator_epoch
        try:
            task = asyncio.get_running_loop().create_task(self._load(partition, coordinator_epoch))
        except RuntimeError:  # no loop (unit tests calling in directly): load at once
            self.loading[partition] = None
            self._finish_load(partition, coordinator_epoch, self._replay_all(partition))
            return
        self.loading[partition] = task

    def on_resigned(self, partition: int) -> None:
        task = self.loading.pop(partition, None)
        self._loading_epochs.pop(partition, None)
        if task is not None:
            task.cancel()
        self._unload(partition)

    def _unload(self, partition: int) -> None:
        if self.owned.pop(partition, None) is None:
            return
        for tid in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[tid]
        log.info("unloaded transaction state partition", broker_id=self.broker_id,
                 partition=partition)

    def shutdown(self) -> None:
        for partition in list(self.owned) + list(self.loading):
            self.on_resigned(partition)

    # -- loading ----------------------------------------------------------------------------

    async def _load(self, partition: int, coordinator_epoch: int) -> None:
        """Each chunk is read on the loop (only the loop changes the log) and decoded in a worker
        thread, as the group coordinator loads its partitions."""
        await asyncio.sleep(0)
        try:
            latest: dict[str, tr.TransactionLogValue | None] = {}
            for data in self._chunks(partition):
                await asyncio.to_thread(self._replay_chunk, data, latest)
            self._finish_load(partition, coordinator_epoch, latest)
        except Exception:
            log.exception("loading transaction state partition failed",
                          broker_id=self.broker_id, partition=partition)
            self.loading.pop(partition, None)
            self._loading_epochs.pop(partition, None)

    def _replay_all(self, partition: int) -> dict[str, tr.TransactionLogValue | None]:
        latest: dict[str, tr.TransactionLogValue | None] = {}
        for data in self._chunks(partition):
            self._replay_chunk(data, latest)
        return latest

    def _chunks(self, partition: int) -> Iterator[bytes]:
        rm_partition = self.replica_manager.partitions.get((TRANSACTION_STATE_TOPIC, partition))
        if rm_partition is not None:
            yield from rm_partition.log.chunks(LOAD_CHUNK_BYTES)

    @staticmethod
    def _replay_chunk(data: bytes, latest: dict[str, tr.TransactionLogValue | None]) -> None:
        for pos, header in iter_batches(data):
            if header.is_control:
                continue
            for record in decode_batch(data, pos)[1]:
                if record.key is not None:
                    latest[tr.read_transaction_log_key(record.key)] = \
                        tr.read_transaction_log_value(record.value)

    def _finish_load(self, partition: int, coordinator_epoch: int,
                     latest: dict[str, tr.TransactionLogValue | None]) -> None:
        loaded = [TransactionMetadata.from_log(tid, value) for tid, value in latest.items()
                  if value is not None and value.state != tr.TransactionState.DEAD]
        self.loading.pop(partition, None)
        self._loading_epochs.pop(partition, None)
        self.owned[partition] = coordinator_epoch
        for txn in loaded:
            self.transactions[txn.transactional_id] = txn
        log.info("loaded transaction state partition", broker_id=self.broker_id,
                 partition=partition, coordinator_epoch=coordinator_epoch, transactions=len(loaded))
        self._on_loaded(partition, coordinator_epoch, loaded)

    # -- writing ----------------------------------------------------------------------------

    @property
    def log_value_version(self) -> int:
        """Kafka writes the flexible value (with its tagged fields) from transaction.version 1."""
        return 1 if self.config["feature.levels"]["transaction.version"] >= 1 else 0

    async def append(self, txn: TransactionMetadata, transit: TxnTransitMetadata,
                     now_ms: int) -> ErrorCode:
        """Write `transit` for `txn` (a tombstone for Dead) with acks=-1; apply it when written,
        drop it otherwise. NOT_COORDINATOR when this broker lost the partition (or it was
        reloaded) meanwhile, whatever the append said: the new coordinator has the truth."""
        tid = txn.transactional_id
        partition = self.partition_for(tid)
        epoch = self.owned.get(partition)
        value = None if transit.state == tr.TransactionState.DEAD \
            else tr.transaction_log_value(transit.log_value(), self.log_value_version)
        batch = encode_batch([(tr.transaction_log_key(tid), value, [], now_ms)])
        key = (TRANSACTION_STATE_TOPIC, partition)
        try:
            results = await self.replica_manager.produce(-1, APPEND_TIMEOUT_MS, {key: batch})
            error = results[key].error
        except Exception:
            log.exception("transaction state append failed", transactional_id=tid)
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        error = APPEND_ERRORS.get(error, error)
        if error == ErrorCode.NONE and (epoch is None or self.owned.get(partition) != epoch
                                        or self.transactions.get(tid) is not txn):
            error = ErrorCode.NOT_COORDINATOR
        if error != ErrorCode.NONE:
            txn.abort_transition()
            log.warning("transaction state not written", transactional_id=tid,
                        state=transit.state.kafka_name, error=error.name)
            return error
        txn.complete_transition(transit)
        if transit.state == tr.TransactionState.DEAD:
            self.transactions.pop(tid, None)
        return ErrorCode.NONE
