"""One transactional id's state at its coordinator (Kafka's TransactionMetadata): producer id and
epoch, state, partitions, timestamps, and the one pending transition being written to the log.

A change is prepared (`prepare_*` returns the target as a TxnTransitMetadata and marks it pending),
written to `__transaction_state`, and only then applied (`complete_transition`) — or dropped
(`abort_transition`) when the write fails. While a transition is pending, requests for the id get
CONCURRENT_TRANSACTIONS. Pure state, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.errors import ErrorCode, KafkaError
from protocol.transaction_records import TransactionLogValue, TransactionState, partitions_by_topic

S = TransactionState
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # an epoch that reaches it makes the coordinator rotate the producer id

# The states each state may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    # One epoch of headroom: the producer bumps its own epoch once when it aborts (KIP-360).
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(slots=True, frozen=True)
class TxnTransitMetadata:
    """The state a transactional id moves to once its log record is written."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[tuple[str, int]]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def log_value(self) -> TransactionLogValue:
        """What `__transaction_state` holds for this state (PrepareEpochFence is never written:
        the abort it leads to is)."""
        return TransactionLogValue(
            self.producer_id, self.producer_epoch, self.txn_timeout_ms, self.state,
            partitions_by_topic(self.partitions), self.txn_last_update_timestamp,
            self.txn_start_timestamp, self.last_producer_id, self.next_producer_id,
            self.client_transaction_version)


@dataclass(slots=True, eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TransactionState | None = None
    # Transactions v2 (KIP-890 part 2): the id the transaction ends with when its epoch ran out,
    # and which version of the protocol the client speaks (2: every EndTxn bumps the epoch).
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """The state a coordinator loads from the latest record of an id."""
        return cls(transactional_id, value.producer_id, value.previous_producer_id,
                   value.producer_epoch, NO_PRODUCER_EPOCH, value.transaction_timeout_ms,
                   value.state, {(t, p) for t, ids in value.partitions.items() for p in ids},
                   value.start_timestamp_ms, value.last_update_timestamp_ms,
                   next_producer_id=value.next_producer_id,
                   client_transaction_version=value.client_transaction_version)

    # --- queries ---

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def is_transactions_v2(self) -> bool:
        """The open (or last) transaction is a v2 one: its EndTxn bumps the epoch."""
        return self.client_transaction_version >= 2

    def end_txn_epoch_bumped(self, producer_epoch: int) -> bool:
        """A v2 EndTxn's retry: the epoch it came with is the one before the bump it made."""
        return (self.is_transactions_v2 and self.state != S.PREPARE_EPOCH_FENCE
                and self.producer_epoch == producer_epoch + 1)

    def is_expired(self, now_ms: int) -> bool:
        """An open transaction older than its timeout: the coordinator aborts it."""
        return (self.state == S.ONGOING and not self.pending
                and self.txn_start_timestamp + self.txn_timeout_ms < now_ms)

    # --- transitions (each returns the target and marks it pending) ---

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state unchanged, e.g. to answer InitProducerId from a completed state."""
        return self._transit()

    def accepts_producer(self, expected: tuple[int, int]) -> bool:
        """Whether a KIP-360 client's last (producer id, epoch) may re-initialise this id: a fresh
        id, the current producer id, or the previous id whose epochs ran out (a retried rotation)."""
        producer_id, epoch = expected
        return (self.producer_epoch == NO_PRODUCER_EPOCH or producer_id == self.producer_id
                or (producer_id == self.last_producer_id and is_epoch_exhausted(epoch)))

    def prepare_increment_producer_epoch(
        self, txn_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata:
        """InitProducerId: the next epoch of the current producer id. A client that says which
        epoch it had gets the bump only if that is the current epoch, and the same answer again
        if it is the previous one (its retry); any other epoch is fenced."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise KafkaError(ErrorCode.PRODUCER_FENCED,
                             f"epoch {expected_epoch} is not the current epoch "
                             f"{self.producer_epoch} of {self.transactional_id}")
        return self._prepare(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
                             txn_timeout_ms=txn_timeout_ms, partitions=frozenset(),
                             txn_start_timestamp=-1, now_ms=now_ms)

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, recovered: bool
    ) -> TxnTransitMetadata:
        """A new producer id at epoch 0, when the old id's epochs are used up; `recovered` (a client
        that said its last id and epoch) keeps the old pair so the client's retry is recognised."""
        return self._prepare(
            S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
            last_producer_id=self.producer_id if recovered else NO_PRODUCER_ID,
            last_producer_epoch=self.producer_epoch if recovered else NO_PRODUCER_EPOCH,
            txn_timeout_ms=txn_timeout_ms, partitions=frozenset(), txn_start_timestamp=-1,
            now_ms=now_ms)

    def prepare_fence_producer_epoch(self, now_ms: int) -> TxnTransitMetadata:
        """Before aborting an open transaction for a new producer (or a timeout), bump the epoch
        so the old producer is fenced; the epoch is not written, the abort that follows is."""
        if self.state == S.PREPARE_EPOCH_FENCE:  # the abort after an earlier fence failed: no re-bump
            return self._transit()
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise KafkaError(ErrorCode.PRODUCER_FENCED, "cannot fence: producer epoch exhausted")
        return self._prepare(S.PREPARE_EPOCH_FENCE, producer_epoch=self.producer_epoch + 1,
                             last_producer_epoch=NO_PRODUCER_EPOCH, now_ms=now_ms)

    def prepare_add_partitions(
        self, added: set[tuple[str, int]], now_ms: int, client_transaction_version: int = 0
    ) -> TxnTransitMetadata:
        """AddPartitionsToTxn / AddOffsetsToTxn, or (transactions v2) a Produce or TxnOffsetCommit
        adding its partition: the transaction (re)starts or grows."""
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) \
            else self.txn_start_timestamp
        partitions = self.partitions | added if self.state == S.ONGOING else set(added)
        return self._prepare(S.ONGOING, partitions=frozenset(partitions),
                             txn_start_timestamp=start, now_ms=now_ms,
                             client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int,
                                client_transaction_version: int = 0,
                                next_producer_id: int = NO_PRODUCER_ID) -> TxnTransitMetadata:
        """EndTxn (or the coordinator's abort of an expired or fenced transaction). A v2 EndTxn
        bumps the epoch, so its markers fence the producer's writes of this transaction; when the
        epoch runs out, `next_producer_id` is the id the transaction completes with."""
        if state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise ValueError(f"not a prepare state: {state!r}")
        if client_transaction_version >= 2 and self.state != S.PREPARE_EPOCH_FENCE:
            return self._prepare(state, now_ms=now_ms, producer_epoch=self.producer_epoch + 1,
                                 last_producer_epoch=self.producer_epoch,
                                 next_producer_id=next_producer_id,
                                 client_transaction_version=client_transaction_version)
        return self._prepare(state, now_ms=now_ms,
                             client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """Every partition has its marker: CompleteCommit or CompleteAbort, no partitions. A v2
        transaction that ran out of epochs moves to its next producer id, at epoch 0."""
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if self.is_transactions_v2 and self.next_producer_id != NO_PRODUCER_ID:
            return self._prepare(state, partitions=frozenset(), now_ms=now_ms,
                                 producer_id=self.next_producer_id, producer_epoch=0,
                                 last_producer_id=self.producer_id,
                                 last_producer_epoch=self.producer_epoch,
                                 next_producer_id=NO_PRODUCER_ID)
        return self._prepare(state, partitions=frozenset(), now_ms=now_ms)

    def prepare_dead(self, now_ms: int) -> TxnTransitMetadata:
        """transactional.id.expiration.ms passed with no transaction: the id is removed."""
        return self._prepare(S.DEAD, partitions=frozenset(), now_ms=now_ms)

    # --- applying ---

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """The transition's record is written: apply it."""
        if self.pending_state != transit.state:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"{self.transactional_id}: completing {transit.state.kafka_name} "
                             f"while {self.pending_state!r} is pending")
        if self.state not in VALID_PREVIOUS_STATES[transit.state]:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"{self.transactional_id}: {self.state.kafka_name} -> "
                             f"{transit.state.kafka_name} is not a valid transition")
        self.producer_id, self.last_producer_id = transit.producer_id, transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.state = transit.state
        self.pending_state = None

    def abort_transition(self) -> None:
        """The write failed: nothing changes, the id takes requests again."""
        self.pending_state = None

    def _transit(self, **changes: object) -> TxnTransitMetadata:
        values = {
            "producer_id": self.producer_id, "last_producer_id": self.last_producer_id,
            "producer_epoch": self.producer_epoch, "last_producer_epoch": self.last_producer_epoch,
            "txn_timeout_ms": self.txn_timeout_ms, "state": self.state,
            "partitions": frozenset(self.partitions), "txn_start_timestamp": self.txn_start_timestamp,
            "txn_last_update_timestamp": self.txn_last_update_timestamp,
            "next_producer_id": self.next_producer_id,
            "client_transaction_version": self.client_transaction_version,
        }
        values.update({k: v for k, v in changes.items() if v is not None})
        return TxnTransitMetadata(**values)  # type: ignore[arg-type]

    def _prepare(self, state: TransactionState, *, now_ms: int, **changes: object) -> TxnTransitMetadata:
        if self.pending:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS,
                             f"{self.transactional_id} is moving to {self.pending_state.kafka_name}")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"{self.transactional_id}: cannot go from {self.state.kafka_name} "
                             f"to {state.kafka_name}")
        if state == S.PREPARE_EPOCH_FENCE:
            # Kept in memory only: the abort that follows starts from it.
            transit = self._transit(state=state, txn_last_update_timestamp=now_ms, **changes)
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.state = state
            return transit
        transit = self._transit(state=state, txn_last_update_timestamp=now_ms, **changes)
        self.pending_state = state
        return transit
