"""TransactionCoordinator: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions, and the timer jobs that abort
transactions past their timeout and remove idle ids — Kafka's TransactionCoordinator (3.9).

EndTxn is answered once PrepareCommit/PrepareAbort is written; the markers then go out in the
background and CompleteCommit/CompleteAbort is written when every leader has its marker. A broker
that becomes coordinator of a partition finishes the prepared transactions it loads the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker.coordinator.transaction.transaction_marker_channel import (
    TransactionMarkerChannel,
    TxnMarker,
)
from broker.coordinator.transaction.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
)
from broker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from broker.logs import get_logger
from broker.metadata.coordinator_keys import java_string_hash, kafka_abs
from broker.metadata.store import MetadataStoreError
from broker.metadata.topic_names import OFFSETS_TOPIC
from protocol.errors import ErrorCode, KafkaError
from protocol.transaction_records import ControlType
from protocol.transaction_records import TransactionState as S
from timer.scheduler import KafkaScheduler

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.metadata_cache import MetadataCache
    from broker.replication.replica_manager import ReplicaManager
    from timer import SystemTimer

log = get_logger("kafka_sim.txn_coordinator")
TopicPartition = tuple[str, int]
COMPLETE_RETRY_S = 0.1


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, broker_id: int, timer: SystemTimer,
                 replica_manager: ReplicaManager, cache: MetadataCache,
                 generate_producer_id: Callable[[], Awaitable[int]], channel: TransactionMarkerChannel,
                 time_ms: Callable[[], int],
                 sync_producer_ids: Callable[[], Awaitable[None]] | None = None) -> None:
        self.config = config
        self.broker_id = broker_id
        self.timer = timer
        self.cache = cache
        self.generate_producer_id = generate_producer_id
        # Awaited before a new id is written anywhere: the id block it came from must be durable.
        self.sync_producer_ids = sync_producer_ids
        self.channel = channel
        self.time_ms = time_ms  # wall time: persisted timestamps and timeouts
        self.manager = TransactionStateManager(config, broker_id, replica_manager, cache,
                                               self._on_partition_loaded)
        self.active = True
        self._tasks: set[asyncio.Task] = set()
        self.scheduler = KafkaScheduler(timer, lambda job, exc: log.error(
            "transaction coordinator job failed", job=job, exc_info=exc))

    # -- plumbing ---------------------------------------------------------------------------

    def spawn(self, coro: Awaitable) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_leadership(self, partition: int, is_leader: bool, leader_epoch: int) -> None:
        if is_leader:
            self.manager.on_elected(partition, leader_epoch)
        else:
            self.manager.on_resigned(partition)

    def startup(self) -> None:
        config = self.config
        self.scheduler.schedule(
            "transaction-abort", self.abort_timed_out_transactions,
            config["transaction.abort.timed.out.transaction.cleanup.interval.ms"])
        self.scheduler.schedule(
            "transactionalId-expiration", self.remove_expired_transactional_ids,
            config["transaction.remove.expired.transaction.cleanup.interval.ms"])

    def shutdown(self) -> None:
        self.active = False
        self.scheduler.shutdown()
        self.manager.shutdown()
        self.channel.close()
        for task in self._tasks:
            task.cancel()

    def _txn(self, transactional_id: str) -> TransactionMetadata | None:
        return self.manager.transactions.get(transactional_id)

    # -- InitProducerId ---------------------------------------------------------------------

    async def handle_init_producer_id(
        self, transactional_id: str, txn_timeout_ms: int, expected: tuple[int, int] | None,
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch). `expected` is a KIP-360 client's last id and epoch."""
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if txn_timeout_ms <= 0 or txn_timeout_ms > self.config["transaction.max.timeout.ms"]:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error = self.manager.status(transactional_id) if self.active else \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error is not None:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        txn = self._txn(transactional_id)
        now = self.time_ms()
        if txn is None:
            try:
                producer_id = await self.generate_producer_id()
            except KafkaError as exc:
                return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            txn = self._txn(transactional_id)  # another request may have made it meanwhile
        if txn is None:
            txn = TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_ID,
                                      NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, txn_timeout_ms, S.EMPTY,
                                      txn_last_update_timestamp=now)
            self.manager.transactions[transactional_id] = txn
        try:
            if txn.pending:
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "a transition is pending")
            if expected is not None and not txn.accepts_producer(expected):
                raise KafkaError(ErrorCode.PRODUCER_FENCED,
                                 f"producer {expected} is not the current producer of "
                                 f"{transactional_id}")
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "markers are being written")
            if txn.state in (S.ONGOING, S.PREPARE_EPOCH_FENCE):
                # Fence the old producer and abort its transaction; the client retries meanwhile.
                txn.prepare_fence_producer_epoch(now)
                self.spawn(self._end_transaction(txn, txn.producer_id, txn.producer_epoch,
                                                 ControlType.ABORT, from_client=False))
                return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if txn.state == S.DEAD:
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "the id is being removed")
            if txn.is_producer_epoch_exhausted():
                # (the epoch is exhausted once in 32,767 inits: await the next id unguarded)
                transit = txn.prepare_producer_id_rotation(
                    await self.generate_producer_id(), txn_timeout_ms, now, expected is not None)
            else:
                transit = txn.prepare_increment_producer_epoch(
                    txn_timeout_ms, None if expected is None else expected[1], now)
        except KafkaError as exc:
            return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if self.sync_producer_ids is not None:
            try:
                await self.sync_producer_ids()
            except MetadataStoreError:
                txn.abort_transition()
                return ErrorCode.KAFKA_STORAGE_ERROR, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error = await self.manager.append(txn, transit, now)
        if error != ErrorCode.NONE:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        log.info("producer initialised", transactional_id=transactional_id,
                 producer_id=transit.producer_id, producer_epoch=transit.producer_epoch)
        return ErrorCode.NONE, transit.producer_id, transit.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int,
                        producer_epoch: int) -> TransactionMetadata:
        if transactional_id == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "empty transactional id")
        error = self.manager.status(transactional_id) if self.active else \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error is not None:
            raise KafkaError(error)
        txn = self._txn(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                             f"producer {producer_id} is not the producer of {transactional_id}")
        if txn.producer_epoch != producer_epoch:
            raise KafkaError(ErrorCode.PRODUCER_FENCED,
                             f"epoch {producer_epoch} is not the current {txn.producer_epoch}")
        return txn

    async def handle_add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: set[TopicPartition], client_transaction_version: int = 0,
    ) -> ErrorCode:
        """One error for all the partitions (the handler answers it for each). Transactions v2
        (`client_transaction_version` 2) add them for a leader's Produce or a TxnOffsetCommit."""
        try:
            txn = self._check_producer(transactional_id, producer_id, producer_epoch)
            if txn.pending or txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
            if txn.state == S.ONGOING and partitions <= txn.partitions:
                return ErrorCode.NONE  # nothing new: no write
            now = self.time_ms()
            transit = txn.prepare_add_partitions(partitions, now, client_transaction_version)
        except KafkaError as exc:
            return exc.code
        return await self.manager.append(txn, transit, now)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4 verify_only: which partitions the open transaction already has."""
        try:
            txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        except KafkaError as exc:
            return dict.fromkeys(partitions, exc.code)
        return {tp: ErrorCode.NONE if txn.state == S.ONGOING and tp in txn.partitions
                else ErrorCode.INVALID_TXN_STATE for tp in partitions}

    def offsets_partition_for(self, group_id: str) -> TopicPartition:
        topic = self.cache.topic(OFFSETS_TOPIC)
        count = topic.num_partitions if topic else self.config["offsets.topic.num.partitions"]
        return OFFSETS_TOPIC, kafka_abs(java_string_hash(group_id)) % count

    async def handle_add_offsets(self, transactional_id: str, producer_id: int,
                                 producer_epoch: int, group_id: str) -> ErrorCode:
        return await self.handle_add_partitions(transactional_id, producer_id, producer_epoch,
                                                {self.offsets_partition_for(group_id)})

    # -- EndTxn -----------------------------------------------------------------------------

    async def handle_end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             commit: bool, client_transaction_version: int = 0,
                             ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): EndTxn v5 (transactions v2) answers the id and epoch the
        producer goes on with, the epoch this EndTxn bumped."""
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error = self.manager.status(transactional_id) if self.active else \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        txn = self._txn(transactional_id)
        if error is None and txn is None:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if error is not None:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        assert txn is not None
        next_producer_id = NO_PRODUCER_ID
        if (client_transaction_version >= 2 and txn.state == S.ONGOING and not txn.pending
                and txn.producer_id == producer_id and txn.producer_epoch == producer_epoch
                and txn.is_producer_epoch_exhausted()):
            # The bump would leave no epoch: the transaction completes under a new producer id.
            try:
                next_producer_id = await self.generate_producer_id()
                if self.sync_producer_ids is not None:
                    await self.sync_producer_ids()
            except (KafkaError, MetadataStoreError) as exc:
                code = exc.code if isinstance(exc, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
                return code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        return await self._end_transaction(
            txn, producer_id, producer_epoch, ControlType.COMMIT if commit else ControlType.ABORT,
            from_client=True, client_transaction_version=client_transaction_version,
            next_producer_id=next_producer_id)

    @staticmethod
    def _valid_epoch(txn: TransactionMetadata, producer_id: int, producer_epoch: int,
                     from_client: bool) -> bool:
        """Kafka's check of an EndTxn's epoch. In a v2 transaction the same epoch means the next
        transaction's EndTxn, so a retry is recognised by the epoch it bumped (or, when that ran
        out, by the producer id it left)."""
        if txn.is_transactions_v2 and txn.state != S.PREPARE_EPOCH_FENCE:
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return txn.end_txn_epoch_bumped(producer_epoch)
            if txn.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                retry_on_overflow = (txn.last_producer_id == producer_id
                                     and producer_epoch == MAX_PRODUCER_EPOCH - 1
                                     and txn.producer_epoch == 0)
                return txn.end_txn_epoch_bumped(producer_epoch) or retry_on_overflow
            return producer_epoch == txn.producer_epoch
        return producer_epoch == txn.producer_epoch or (
            not from_client and producer_epoch > txn.producer_epoch)

    async def _end_transaction(self, txn: TransactionMetadata, producer_id: int,
                               producer_epoch: int, result: ControlType, from_client: bool,
                               client_transaction_version: int | None = None,
                               next_producer_id: int = NO_PRODUCER_ID,
                               ) -> tuple[ErrorCode, int, int]:
        """Kafka's handleEndTransaction: write Prepare*, then (in the background) the markers and
        Complete*. The coordinator's own aborts (fencing, timeouts) come with from_client False
        and keep the transaction's protocol version."""
        commit = result == ControlType.COMMIT
        if client_transaction_version is None:
            client_transaction_version = txn.client_transaction_version
        try:
            if txn.producer_id != producer_id and not (
                    txn.is_transactions_v2 and txn.last_producer_id == producer_id
                    and txn.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)):
                raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if not self._valid_epoch(txn, producer_id, producer_epoch, from_client):
                raise KafkaError(ErrorCode.PRODUCER_FENCED)
            if txn.pending:
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
            state = txn.state
            if state == S.ONGOING or (state == S.PREPARE_EPOCH_FENCE and not commit):
                transit = txn.prepare_abort_or_commit(
                    S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, self.time_ms(),
                    client_transaction_version, next_producer_id)
            elif state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
                # a retry of an EndTxn that completed
                return ErrorCode.NONE, txn.producer_id, txn.producer_epoch
            elif state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
            else:  # Empty, the other outcome, Dead
                raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                                 f"{txn.transactional_id} is {state.kafka_name}")
        except KafkaError as exc:
            if not from_client:
                log.info("coordinator abort not started", transactional_id=txn.transactional_id,
                         error=exc.code.name)
            return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error = await self.manager.append(txn, transit, self.time_ms())
        if error != ErrorCode.NONE:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        coordinator_epoch = self.manager.coordinator_epoch(txn.transactional_id)
        if coordinator_epoch is not None:
            self.spawn(self._complete(txn, coordinator_epoch))
        if transit.next_producer_id != NO_PRODUCER_ID:  # what CompleteCommit/Abort will hold
            return ErrorCode.NONE, transit.next_producer_id, 0
        return ErrorCode.NONE, transit.producer_id, transit.producer_epoch

    async def _complete(self, txn: TransactionMetadata, coordinator_epoch: int) -> None:
        """Markers to every partition, then CompleteCommit/CompleteAbort."""
        tid = txn.transactional_id

        def still_ours() -> bool:
            return (self.active and self._txn(tid) is txn
                    and self.manager.coordinator_epoch(tid) == coordinator_epoch)

        result = ControlType.COMMIT if txn.state == S.PREPARE_COMMIT else ControlType.ABORT
        marker = TxnMarker(txn.producer_id, txn.producer_epoch, result, coordinator_epoch,
                           frozenset(txn.partitions))
        if not await self.channel.send(marker, still_ours):
            return  # the new coordinator finishes it
        while still_ours():
            try:
                transit = txn.prepare_complete(self.time_ms())
            except KafkaError:  # another write pending: try again shortly
                await asyncio.sleep(COMPLETE_RETRY_S)
                continue
            error = await self.manager.append(txn, transit, self.time_ms())
            if error in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR):
                log.info("transaction completed", transactional_id=tid,
                         state=txn.state.kafka_name, error=error.name)
                return
            await asyncio.sleep(COMPLETE_RETRY_S)

    def _on_partition_loaded(self, partition: int, coordinator_epoch: int,
                             transactions: list[TransactionMetadata]) -> None:
        """A new coordinator finishes what its predecessor prepared."""
        for txn in transactions:
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and self.active:
                self.spawn(self._complete(txn, coordinator_epoch))

    # -- timeouts and expiry ----------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> int:
        """Abort (with an epoch fence, so the producer cannot go on) every transaction open longer
        than its timeout; returns how many aborts started."""
        now = self.time_ms()
        started = 0
        for txn in self.manager.owned_transactions():
            if txn.pending or not (txn.is_expired(now) or txn.state == S.PREPARE_EPOCH_FENCE):
                continue
            try:
                txn.prepare_fence_producer_epoch(now)
            except KafkaError:
                continue
            log.info("aborting timed out transaction", transactional_id=txn.transactional_id,
                     producer_id=txn.producer_id, timeout_ms=txn.txn_timeout_ms)
            self.spawn(self._end_transaction(txn, txn.producer_id, txn.producer_epoch,
                                             ControlType.ABORT, from_client=False))
            started += 1
        return started

    async def remove_expired_transactional_ids(self) -> int:
        """Ids without an open transaction for transactional.id.expiration.ms get a tombstone."""
        now = self.time_ms()
        expiration = self.config["transactional.id.expiration.ms"]
        removed = 0
        for txn in self.manager.owned_transactions():
            if (txn.pending or txn.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    or txn.txn_last_update_timestamp + expiration > now):
                continue
            if await self.manager.append(txn, txn.prepare_dead(now), now) == ErrorCode.NONE:
                removed += 1
                log.info("transactional id expired", transactional_id=txn.transactional_id)
        return removed

    # -- DescribeTransactions / ListTransactions --------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        error = self.manager.status(transactional_id)
        if error is not None:
            return error, None
        txn = self._txn(transactional_id)
        if txn is None or txn.state == S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, txn

    def list_transactions(self, states: set[str], producer_ids: set[int],
                          min_duration_ms: int = -1) -> tuple[ErrorCode, list[TransactionMetadata],
                                                              list[str]]:
        """(error, matching transactions, unknown state filters)."""
        known = {s.kafka_name for s in S}
        unknown = sorted(states - known)
        now = self.time_ms()
        found = [t for t in self.manager.owned_transactions()
                 if (not states or t.state.kafka_name in states)
                 and (not producer_ids or t.producer_id in producer_ids)
                 and (min_duration_ms < 0 or (t.txn_start_timestamp >= 0
                                              and now - t.txn_start_timestamp >= min_duration_ms))]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading else ErrorCode.NONE
        return error, found, unknown
