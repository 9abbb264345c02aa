"""Transactions in the log: open transactions per producer, markers from the coordinator only,
the last stable offset, the aborted-transaction index, and all of it after replication, truncation
and a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.records import encode_batch
from protocol.transaction_records import ControlType, marker_batch
from storage.append_origin import AppendOrigin
from storage.log import Log
from storage.log_config import LogConfig
from storage.naming import transaction_index_file
from storage.transaction_index import AbortedTxn
from timer import ManualClock

T0 = 1_700_000_000_000
COORDINATOR = AppendOrigin.COORDINATOR


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def open_log(path: Path, clock: ManualClock, **config) -> Log:
    return Log.open(path, LogConfig(**config), now_ms=clock.now_ms)


def txn(pid: int, seq: int, n: int = 1, epoch: int = 0) -> bytes:
    return encode_batch([(None, b"t%d" % i, [], T0) for i in range(n)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def idem(pid: int, seq: int, epoch: int = 0) -> bytes:
    return encode_batch([(None, b"i", [], T0)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq)


def end(log: Log, pid: int, kind: ControlType, epoch: int = 0, coordinator_epoch: int = 0):
    return log.append_as_leader(marker_batch(pid, epoch, kind, coordinator_epoch, T0), 0,
                                origin=COORDINATOR)


def error_of(call) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code


def test_open_transactions_hold_the_lso_until_their_marker_is_replicated(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(encode_batch([(None, b"plain", [], T0)]), 0)  # offset 0
    log.append_as_leader(txn(1, 0, 2), 0)  # 1-2, producer 1 opens at 1
    log.append_as_leader(txn(2, 0), 0)  # 3, producer 2 opens at 3
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 1
    info = end(log, 1, ControlType.COMMIT)  # marker at 4
    assert info.first_offset == 4
    assert log.last_stable_offset == 1  # the marker is not below the HW yet
    log.high_watermark = 5
    assert log.last_stable_offset == 3  # producer 2 still open
    end(log, 2, ControlType.ABORT)  # 5
    log.high_watermark = 6
    assert log.last_stable_offset == 6 == log.high_watermark
    assert log.collect_aborted_transactions(0, 6) == [AbortedTxn(2, 3, 5, 6)]
    assert log.collect_aborted_transactions(0, 3) == []  # the abort does not overlap [0, 3)


def test_lso_never_exceeds_the_high_watermark(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(encode_batch([(None, b"p", [], T0)] * 3), 0)
    log.high_watermark = 2
    assert log.last_stable_offset == 2


def test_aborted_index_entry_records_the_oldest_other_open_transaction(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(txn(1, 0), 0)  # 0
    log.append_as_leader(txn(2, 0), 0)  # 1
    end(log, 2, ControlType.ABORT)  # 2: producer 1 (from 0) is still open
    end(log, 1, ControlType.ABORT)  # 3
    assert list(log.active_segment.txn_index) == [AbortedTxn(2, 1, 2, 0), AbortedTxn(1, 0, 3, 4)]


def test_clients_may_not_write_markers(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(txn(1, 0), 0)
    marker = marker_batch(1, 0, ControlType.COMMIT, 0, T0)
    assert error_of(lambda: log.append_as_leader(marker, 0)) == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 1 and log.producer_state.ongoing == {1: 0}


def test_plain_batch_inside_a_transaction_is_invalid_txn_state(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(txn(1, 0), 0)
    assert error_of(lambda: log.append_as_leader(idem(1, 1), 0)) == ErrorCode.INVALID_TXN_STATE
    log.append_as_leader(txn(1, 1), 0)  # the transaction goes on
    end(log, 1, ControlType.COMMIT)
    assert log.append_as_leader(idem(1, 2), 0).first_offset == 3  # and after it, plain writes


def test_fenced_markers(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(txn(1, 0, epoch=3), 0)
    assert error_of(lambda: end(log, 1, ControlType.ABORT, epoch=2)) == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    end(log, 1, ControlType.ABORT, epoch=4, coordinator_epoch=7)  # a fenced producer: epoch bump
    assert log.producer_state.last_entry(1).producer_epoch == 4
    assert error_of(lambda: end(log, 1, ControlType.ABORT, epoch=4, coordinator_epoch=6)) == \
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # the old epoch's producer can no longer write
    assert error_of(lambda: log.append_as_leader(txn(1, 1, epoch=3), 0)) == \
        ErrorCode.INVALID_PRODUCER_EPOCH


def test_marker_without_an_open_transaction_is_accepted(tmp_path, clock):
    # The coordinator may abort a transaction whose data never reached this partition.
    log = open_log(tmp_path / "t-0", clock)
    end(log, 9, ControlType.ABORT)
    assert list(log.active_segment.txn_index) == [AbortedTxn(9, 0, 0, 1)]


def test_followers_track_the_same_transactions(tmp_path, clock):
    leader = open_log(tmp_path / "leader" / "t-0", clock)
    follower = open_log(tmp_path / "follower" / "t-0", clock)
    leader.append_as_leader(txn(1, 0, 2), 0)
    leader.append_as_leader(txn(2, 0), 0)
    end(leader, 1, ControlType.ABORT)
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    assert follower.producer_state.ongoing == {2: 2}
    assert list(follower.active_segment.txn_index) == list(leader.active_segment.txn_index)
    follower.high_watermark = follower.log_end_offset
    assert follower.last_stable_offset == 2


def test_truncation_reopens_a_transaction_and_drops_its_abort(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(txn(1, 0), 0)
    end(log, 1, ControlType.ABORT)
    log.truncate_to(1)
    assert list(log.active_segment.txn_index) == [] and log.producer_state.ongoing == {1: 0}
    log.high_watermark = 1
    assert log.last_stable_offset == 0


def test_state_survives_a_clean_reopen_and_the_index_a_crash(tmp_path, clock):
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=200)
    log.append_as_leader(txn(1, 0), 0)
    log.append_as_leader(txn(2, 0, 3), 0)  # rolls: the snapshot at the roll has both open
    end(log, 1, ControlType.ABORT)
    log.close()
    again = open_log(path, clock, segment_bytes=200)
    assert again.producer_state.ongoing == {2: 1}
    assert again.collect_aborted_transactions(0, again.log_end_offset) == [AbortedTxn(1, 0, 4, 1)]
    again.append_as_leader(idem(3, 0), 0)
    again.flush()  # no close: a crash, and the aborted index is lost with it
    for index_file in path.glob("*.txnindex"):
        index_file.unlink()
    crashed = Log.open(path, LogConfig(segment_bytes=200), now_ms=clock.now_ms, recovery_point=0)
    assert crashed.collect_aborted_transactions(0, crashed.log_end_offset) == \
        [AbortedTxn(1, 0, 4, 1)]
    crashed.flush()
    holder = next(s for s in crashed.segments if s.base_offset <= 4 < s.next_offset)
    assert transaction_index_file(path, holder.base_offset).stat().st_size == 34


def test_open_transactions_do_not_expire(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=clock.now_ms,
                   producer_id_expiration_ms=1000)
    log.append_as_leader(txn(1, 0), 0)
    log.append_as_leader(idem(2, 0), 0)
    clock.advance(5000)
    assert log.producer_state.remove_expired_producers() == [2]
    assert log.producer_state.last_entry(1) is not None


def test_v1_snapshots_are_still_read(tmp_path, clock):
    import struct

    from crc32c import crc32c

    from storage.naming import producer_snapshot_file
    from storage.producer_state import ProducerStateManager

    body = struct.pack(">qi", 5, 1) + struct.pack(">qhqb", 7, 2, T0, 1) + struct.pack(
        ">iiqqq", 0, 4, 0, 4, T0)
    path = producer_snapshot_file(tmp_path, 5)
    path.write_bytes(struct.pack(">4shI", b"KSPS", 1, crc32c(body)) + body)
    [entry] = ProducerStateManager.read_snapshot(path).values()
    assert (entry.producer_id, entry.producer_epoch, entry.last_seq) == (7, 2, 4)
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (-1, -1)


def test_the_coordinators_transactional_writes_carry_no_sequence(tmp_path, clock):
    """The group coordinator writes a TxnOffsetCommit as the producer's transactional batch without
    a sequence (Kafka's AppendOrigin.Coordinator): accepted from the coordinator, epoch-checked,
    and it opens the producer's transaction; a client must still send sequences."""
    log = open_log(tmp_path / "__consumer_offsets-0", clock)

    def offsets(epoch: int) -> bytes:
        return encode_batch([(b"key", b"offset", [], T0)], producer_id=7, producer_epoch=epoch,
                            is_transactional=True)

    assert error_of(lambda: log.append_as_leader(offsets(1), 0)) == ErrorCode.INVALID_RECORD
    log.append_as_leader(offsets(1), 0, origin=COORDINATOR)  # offset 0
    log.append_as_leader(offsets(1), 0, origin=COORDINATOR)  # 1: the same transaction goes on
    assert error_of(lambda: log.append_as_leader(offsets(0), 0, origin=COORDINATOR)) \
        == ErrorCode.INVALID_PRODUCER_EPOCH
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 0  # open from its first batch
    end(log, 7, ControlType.COMMIT, epoch=1)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 3
