"""The transaction state machine: Kafka's valid transitions, one pending write at a time, epoch
bumps and fencing (KIP-360 retries included)."""

from __future__ import annotations

import pytest

from broker.coordinator.transaction.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.transaction_records import TransactionState as S
from protocol.transaction_records import read_transaction_log_value, transaction_log_value


def fresh(producer_id: int = 1000) -> TransactionMetadata:
    return TransactionMetadata("tx", producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
                               NO_PRODUCER_EPOCH, 60_000, S.EMPTY)


def apply(meta: TransactionMetadata, transit) -> TransactionMetadata:
    meta.complete_transition(transit)
    return meta


def error_of(call) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code


def test_first_init_gives_epoch_zero_then_bumps():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(30_000, None, now_ms=10))
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (1000, 0, S.EMPTY)
    assert meta.txn_timeout_ms == 30_000 and meta.txn_last_update_timestamp == 10
    apply(meta, meta.prepare_increment_producer_epoch(30_000, None, now_ms=11))
    assert (meta.producer_epoch, meta.last_producer_epoch) == (1, NO_PRODUCER_EPOCH)


def test_a_full_commit_cycle():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(60_000, None, now_ms=0))
    apply(meta, meta.prepare_add_partitions({("t", 0)}, now_ms=100))
    assert meta.state == S.ONGOING and meta.txn_start_timestamp == 100
    apply(meta, meta.prepare_add_partitions({("t", 1), ("u", 0)}, now_ms=150))
    assert meta.partitions == {("t", 0), ("t", 1), ("u", 0)} and meta.txn_start_timestamp == 100
    transit = meta.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=200)
    assert transit.log_value().partitions == {"t": [0, 1], "u": [0]}
    apply(meta, transit)
    apply(meta, meta.prepare_complete(now_ms=250))
    assert meta.state == S.COMPLETE_COMMIT and meta.partitions == set()
    # the next transaction starts afresh from the completed state
    apply(meta, meta.prepare_add_partitions({("u", 1)}, now_ms=300))
    assert meta.partitions == {("u", 1)} and meta.txn_start_timestamp == 300


def test_one_pending_transition_at_a_time():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(60_000, None, now_ms=0))
    transit = meta.prepare_add_partitions({("t", 0)}, now_ms=1)
    assert meta.pending and meta.state == S.EMPTY  # nothing applied before the write
    assert error_of(lambda: meta.prepare_abort_or_commit(S.PREPARE_COMMIT, 2)) == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    meta.abort_transition()  # the write failed: back to where it was
    assert not meta.pending and meta.state == S.EMPTY and meta.partitions == set()
    apply(meta, meta.prepare_add_partitions({("t", 0)}, now_ms=3))
    assert error_of(lambda: meta.complete_transition(transit)) == ErrorCode.UNKNOWN_SERVER_ERROR


def test_invalid_transitions_are_invalid_txn_state():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(60_000, None, now_ms=0))
    assert error_of(lambda: meta.prepare_abort_or_commit(S.PREPARE_COMMIT, 1)) == \
        ErrorCode.INVALID_TXN_STATE  # EndTxn with no transaction
    apply(meta, meta.prepare_add_partitions({("t", 0)}, now_ms=1))
    apply(meta, meta.prepare_abort_or_commit(S.PREPARE_ABORT, 2))
    assert error_of(lambda: meta.prepare_add_partitions({("t", 1)}, 3)) == \
        ErrorCode.INVALID_TXN_STATE
    assert error_of(lambda: meta.prepare_dead(3)) == ErrorCode.INVALID_TXN_STATE


def test_fencing_an_open_transaction_bumps_the_epoch_once_and_aborts():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(60_000, None, now_ms=0))
    apply(meta, meta.prepare_add_partitions({("t", 0)}, now_ms=1))
    meta.prepare_fence_producer_epoch(now_ms=2)
    assert (meta.state, meta.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 1)
    meta.prepare_fence_producer_epoch(now_ms=3)  # a retried fence does not bump again
    assert meta.producer_epoch == 1
    transit = meta.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms=4)
    assert transit.log_value().producer_epoch == 1
    apply(meta, transit)
    assert meta.state == S.PREPARE_ABORT and meta.partitions == {("t", 0)}


def test_kip360_retries_and_fencing():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(60_000, None, now_ms=0))  # epoch 0
    apply(meta, meta.prepare_increment_producer_epoch(60_000, 0, now_ms=1))  # client had 0
    assert (meta.producer_epoch, meta.last_producer_epoch) == (1, 0)
    # the client did not get the answer and retries with epoch 0: the same epoch again
    apply(meta, meta.prepare_increment_producer_epoch(60_000, 0, now_ms=2))
    assert (meta.producer_epoch, meta.last_producer_epoch) == (1, 0)
    assert error_of(lambda: meta.prepare_increment_producer_epoch(60_000, 7, 3)) == \
        ErrorCode.PRODUCER_FENCED
    assert meta.accepts_producer((1000, 1)) and not meta.accepts_producer((999, 1))


def test_exhausted_epoch_rotates_the_producer_id():
    meta = fresh()
    meta.producer_epoch = MAX_PRODUCER_EPOCH - 1
    assert meta.is_producer_epoch_exhausted()
    apply(meta, meta.prepare_producer_id_rotation(2000, 60_000, now_ms=5, recovered=True))
    assert (meta.producer_id, meta.producer_epoch) == (2000, 0)
    assert (meta.last_producer_id, meta.last_producer_epoch) == (1000, MAX_PRODUCER_EPOCH - 1)
    assert meta.accepts_producer((1000, MAX_PRODUCER_EPOCH - 1))  # the retry of that rotation


def test_expiry_and_log_round_trip():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(1_000, None, now_ms=0))
    apply(meta, meta.prepare_add_partitions({("t", 3)}, now_ms=10))
    assert not meta.is_expired(1_010) and meta.is_expired(1_011)
    transit = meta.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms=1_011)
    loaded = TransactionMetadata.from_log(
        "tx", read_transaction_log_value(transaction_log_value(transit.log_value())))
    assert (loaded.state, loaded.partitions, loaded.producer_epoch) == (S.PREPARE_ABORT, {("t", 3)}, 0)
    assert loaded.txn_start_timestamp == 10 and loaded.txn_last_update_timestamp == 1_011


def test_a_v2_end_bumps_the_epoch_and_the_transaction_keeps_its_version():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(30_000, None, now_ms=1))
    apply(meta, meta.prepare_add_partitions({("t", 0)}, 2, client_transaction_version=2))
    assert meta.is_transactions_v2
    apply(meta, meta.prepare_abort_or_commit(S.PREPARE_COMMIT, 3, client_transaction_version=2))
    # The markers go out under epoch 1: the producer's writes at epoch 0 are fenced by them.
    assert (meta.producer_epoch, meta.last_producer_epoch) == (1, 0)
    assert meta.end_txn_epoch_bumped(0) and not meta.end_txn_epoch_bumped(1)
    apply(meta, meta.prepare_complete(4))
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (1000, 1, S.COMPLETE_COMMIT)
    # v1's EndTxn keeps the epoch
    apply(meta, meta.prepare_add_partitions({("t", 0)}, 5))
    apply(meta, meta.prepare_abort_or_commit(S.PREPARE_ABORT, 6))
    assert meta.producer_epoch == 1 and not meta.is_transactions_v2


def test_a_v2_transaction_out_of_epochs_completes_under_its_next_producer_id():
    meta = fresh()
    apply(meta, meta.prepare_increment_producer_epoch(30_000, None, now_ms=1))
    meta.producer_epoch = MAX_PRODUCER_EPOCH - 1  # (32,766 transactions later)
    apply(meta, meta.prepare_add_partitions({("t", 0)}, 2, client_transaction_version=2))
    apply(meta, meta.prepare_abort_or_commit(S.PREPARE_COMMIT, 3, client_transaction_version=2,
                                             next_producer_id=2000))
    # The markers still carry the old id, at the last epoch; the new id is kept for the end.
    assert (meta.producer_id, meta.producer_epoch, meta.next_producer_id) == \
        (1000, MAX_PRODUCER_EPOCH, 2000)
    written = read_transaction_log_value(transaction_log_value(meta.prepare_no_transit()
                                                               .log_value(), 1))
    assert (written.next_producer_id, written.client_transaction_version) == (2000, 2)
    apply(meta, meta.prepare_complete(4))
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_id) == (2000, 0, 1000)
    assert meta.next_producer_id == NO_PRODUCER_ID and meta.state == S.COMPLETE_COMMIT
    # A coordinator that loads the log knows both ids again.
    loaded = TransactionMetadata.from_log("tx", read_transaction_log_value(
        transaction_log_value(meta.prepare_no_transit().log_value(), 1)))
    assert (loaded.producer_id, loaded.last_producer_id, loaded.client_transaction_version) == \
        (2000, 1000, 2)
