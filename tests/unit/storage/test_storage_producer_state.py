"""Producer state: every idempotence rule on the manual clock, the five-batch window, sequence
wrap, expiry, snapshots (format, corruption, round trip) and the rebuild from snapshot + log on
reopen, truncation and replication."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.records import decode_batch, encode_batch, iter_batches, read_batch_header
from storage.log import Log
from storage.log_config import LogConfig
from storage.naming import parse_snapshot_file, producer_snapshot_file
from storage.producer_state import (
    INT_MAX,
    BatchMetadata,
    ProducerStateManager,
    increment_sequence,
)
from timer import ManualClock

T0 = 1_700_000_000_000
DAY = 86_400_000
PID = 1000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def idem(seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, ts: int = T0,
         value: bytes = b"v") -> bytes:
    return encode_batch([(None, value + b"%d" % i, [], ts) for i in range(n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def plain(n: int) -> bytes:
    return encode_batch([(None, b"p", [], T0)] * n)


def open_log(tmp_path: Path, clock: ManualClock, **config) -> Log:
    expiration = config.pop("expiration", DAY)
    return Log.open(tmp_path / "t-0", LogConfig(**config), now_ms=clock.now_ms,
                    producer_id_expiration_ms=expiration)


def values(log: Log) -> list[bytes]:
    data = log.read(0, 1 << 24).records
    return [r.value for pos, _ in iter_batches(data) for r in decode_batch(data, pos)[1]]


def error_of(log: Log, records: bytes) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(records, 0)
    return info.value.code


# -- the rules -----------------------------------------------------------------------------------


def test_first_batch_at_zero_then_in_sequence(tmp_path, clock):
    log = open_log(tmp_path, clock)
    assert log.append_as_leader(idem(0, 3), 0).first_offset == 0
    assert log.append_as_leader(idem(3, 2), 0).first_offset == 3
    entry = log.producer_state.last_entry(PID)
    assert (entry.producer_epoch, entry.last_seq, entry.last_offset) == (0, 4, 4)
    assert list(entry.batches) == [BatchMetadata(0, 2, 0, 2, T0), BatchMetadata(3, 4, 3, 4, T0)]


def test_duplicate_answers_the_original_offsets_and_writes_nothing(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(plain(2), 0)  # someone else's records first
    first = log.append_as_leader(idem(0, 3), 0)
    log.append_as_leader(idem(3), 0)
    size, leo = log.size_in_bytes, log.log_end_offset
    again = log.append_as_leader(idem(0, 3), 0)
    assert again.duplicate and not first.duplicate
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (2, 4)
    assert again.num_records == 0 and again.valid_bytes == 0
    assert (log.size_in_bytes, log.log_end_offset) == (size, leo)


def test_only_the_last_five_batches_are_recognised(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for seq in range(7):
        log.append_as_leader(idem(seq), 0)
    for seq in range(2, 7):  # the five cached ones
        info = log.append_as_leader(idem(seq), 0)
        assert info.duplicate and info.first_offset == seq
    # Older than the window: not a known duplicate, not the next sequence either.
    assert error_of(log, idem(1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 7


def test_duplicate_needs_the_exact_sequence_range(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(idem(0, 3), 0)
    assert error_of(log, idem(0, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(log, idem(1, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_unknown_producer_must_start_at_zero(tmp_path, clock):
    log = open_log(tmp_path, clock)
    assert error_of(log, idem(5)) == ErrorCode.UNKNOWN_PRODUCER_ID
    assert log.log_end_offset == 0 and log.producer_state.last_entry(PID) is None


def test_gap_is_out_of_order_and_nothing_is_written(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(idem(0, 2), 0)
    assert error_of(log, idem(3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 2
    assert log.producer_state.last_entry(PID).last_seq == 1
    assert log.append_as_leader(idem(2), 0).first_offset == 2  # the right one still goes in


def test_older_epoch_is_fenced(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(idem(0, epoch=3), 0)
    assert error_of(log, idem(1, epoch=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error_of(log, idem(0, epoch=2)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_newer_epoch_starts_at_zero_and_forgets_the_old_batches(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(idem(0, 2, epoch=0), 0)
    assert error_of(log, idem(2, epoch=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(idem(0, 2, epoch=1), 0).first_offset == 2
    entry = log.producer_state.last_entry(PID)
    assert entry.producer_epoch == 1 and list(entry.batches) == [BatchMetadata(0, 1, 2, 3, T0)]
    # The old epoch's batch is no duplicate any more: it is fenced.
    assert error_of(log, idem(0, 2, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequence_wraps_after_int_max(tmp_path, clock):
    assert increment_sequence(INT_MAX - 1, 3) == 1
    assert increment_sequence(INT_MAX, 1) == 0
    log = open_log(tmp_path, clock)
    log.append_as_leader(idem(0), 0)
    state = log.producer_state
    state.last_entry(PID).batches[-1] = BatchMetadata(INT_MAX - 5, INT_MAX - 3, 0, 0, T0)
    log.append_as_leader(idem(INT_MAX - 2, 3), 0)  # INT_MAX-2 .. INT_MAX
    assert state.last_entry(PID).last_seq == INT_MAX
    log.append_as_leader(idem(0, 3), 0)  # wraps to 0
    assert error_of(log, idem(INT_MAX - 1, 4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    info = log.append_as_leader(idem(3, 3), 0)  # then a batch straddling nothing: 3..5
    assert state.last_entry(PID).last_seq == 5 and info.first_offset == 7
    # A batch that itself crosses the wrap: last sequence = (base + count - 1) mod 2^31.
    state.last_entry(PID).batches[-1] = BatchMetadata(INT_MAX - 3, INT_MAX - 2, 0, 0, T0)
    log.append_as_leader(idem(INT_MAX - 1, 4), 0)
    assert state.last_entry(PID).last_seq == 1
    assert log.append_as_leader(idem(INT_MAX - 1, 4), 0).duplicate


def test_idempotent_batch_without_sequence_is_invalid(tmp_path, clock):
    log = open_log(tmp_path, clock)
    assert error_of(log, idem(-1)) == ErrorCode.INVALID_RECORD


def test_several_batches_in_one_append_are_checked_in_order(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(idem(0, 2) + idem(2, 2), 0)
    assert log.producer_state.last_entry(PID).last_seq == 3
    assert error_of(log, idem(4) + idem(6)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 4 and log.producer_state.last_entry(PID).last_seq == 3


def test_producers_are_independent_and_plain_batches_ignored(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(idem(0, pid=1), 0)
    log.append_as_leader(plain(1), 0)
    log.append_as_leader(idem(0, pid=2), 0)
    log.append_as_leader(idem(1, pid=1), 0)
    assert [(p["producer_id"], p["last_sequence"], p["last_offset"])
            for p in log.producer_state.describe()] == [(1, 1, 3), (2, 0, 2)]


def test_log_append_time_duplicate_reports_the_original_append_time(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    first = log.append_as_leader(idem(0, ts=5), 0)
    clock.advance(1000)
    again = log.append_as_leader(idem(0, ts=5), 0)
    assert again.duplicate and again.log_append_time == first.log_append_time == T0


# -- expiry --------------------------------------------------------------------------------------


def test_producers_expire_after_the_expiration_time(tmp_path, clock):
    log = open_log(tmp_path, clock, expiration=60_000)
    log.append_as_leader(idem(0, pid=1), 0)
    clock.advance(30_000)
    log.append_as_leader(idem(0, pid=2, ts=clock.now_ms()), 0)
    clock.advance(29_999)
    assert log.producer_state.remove_expired_producers() == []
    clock.advance(1)
    assert log.producer_state.remove_expired_producers() == [1]
    assert error_of(log, idem(1, pid=1)) == ErrorCode.UNKNOWN_PRODUCER_ID
    clock.advance(30_000)
    assert log.producer_state.remove_expired_producers(clock.now_ms()) == [2]


def test_expired_producers_are_not_reloaded(tmp_path, clock):
    log = open_log(tmp_path, clock, expiration=60_000)
    log.append_as_leader(idem(0), 0)
    log.close()
    clock.advance(60_000)
    assert open_log(tmp_path, clock, expiration=60_000).producer_state.producers == {}


# -- snapshots and rebuild -----------------------------------------------------------------------


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(o for p in directory.iterdir() if (o := parse_snapshot_file(p.name)) is not None)


def state_of(log: Log) -> dict:
    return {pid: (e.producer_epoch, list(e.batches), e.last_timestamp)
            for pid, e in log.producer_state.producers.items()}


def test_snapshot_round_trip(tmp_path, clock):
    manager = ProducerStateManager(tmp_path, now_ms=clock.now_ms)
    for seq in range(7):
        pid = 1 if seq % 2 else 2
        batch = encode_batch([(None, b"x", [], T0 + seq)] * 2, base_offset=seq * 2,
                             producer_id=pid, producer_epoch=4, base_sequence=seq * 2)
        manager.update([(read_batch_header(batch), batch)])
    assert manager.take_snapshot(14)
    assert not manager.take_snapshot(14)  # unchanged: not written again
    path = producer_snapshot_file(tmp_path, 14)
    assert path.name == "00000000000000000014.snapshot"
    loaded = ProducerStateManager.read_snapshot(path)
    assert loaded == manager.producers
    assert [len(e.batches) for _, e in sorted(loaded.items())] == [3, 4]


@pytest.mark.parametrize("damage", ["crc", "version", "truncated", "name"])
def test_damaged_snapshots_are_refused(tmp_path, clock, damage):
    manager = ProducerStateManager(tmp_path, now_ms=clock.now_ms)
    manager.update([(read_batch_header(idem(0)), idem(0))])
    manager.take_snapshot(1)
    path = producer_snapshot_file(tmp_path, 1)
    data = bytearray(path.read_bytes())
    if damage == "crc":
        data[-1] ^= 1
    elif damage == "version":
        struct.pack_into(">h", data, 4, 9)
    elif damage == "truncated":
        del data[-3:]
    else:
        path.unlink()
        path = producer_snapshot_file(tmp_path, 2)
    path.write_bytes(bytes(data))
    with pytest.raises(KafkaError):
        ProducerStateManager.read_snapshot(path)


def test_state_survives_a_clean_reopen_from_the_snapshot(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for seq in range(0, 12, 2):
        log.append_as_leader(idem(seq, 2), 0)
    log.append_as_leader(idem(0, pid=7, epoch=2), 0)
    before = state_of(log)
    log.close()
    assert snapshot_offsets(tmp_path / "t-0") == [13]
    reopened = open_log(tmp_path, clock)
    assert state_of(reopened) == before
    assert reopened.append_as_leader(idem(10, 2), 0).duplicate  # still recognised
    assert reopened.append_as_leader(idem(12), 0).first_offset == 13


def test_rebuilt_from_an_older_snapshot_plus_the_log_after_a_crash(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=400)
    for seq in range(20):
        log.append_as_leader(idem(seq, value=b"x" * 40), 0)
    assert len(log.segments) > 2
    rolled = snapshot_offsets(tmp_path / "t-0")
    assert rolled == [s.base_offset for s in log.segments[1:]]  # one per roll
    before = state_of(log)
    log.flush()  # no close: the state at the log end is not snapshotted (a crash)
    reopened = open_log(tmp_path, clock, segment_bytes=400)
    assert state_of(reopened) == before
    assert reopened.append_as_leader(idem(19, value=b"x" * 40), 0).duplicate


def test_a_corrupt_latest_snapshot_falls_back_to_the_older_one(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=400)
    for seq in range(20):
        log.append_as_leader(idem(seq, value=b"x" * 40), 0)
    before = state_of(log)
    log.close()
    latest = producer_snapshot_file(tmp_path / "t-0", 20)
    latest.write_bytes(b"junk")
    # A clean shutdown: snapshots above the recovery point are trusted (after a crash they are
    # not used, and the state is replayed from the recovery point).
    reopened = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=400), now_ms=clock.now_ms,
                        recovery_point=20, clean_shutdown=True)
    assert state_of(reopened) == before
    assert not latest.exists()


def test_rebuilt_from_the_log_alone(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for seq in range(8):
        log.append_as_leader(idem(seq), 0)
    before = state_of(log)
    log.close()
    for offset in snapshot_offsets(tmp_path / "t-0"):
        producer_snapshot_file(tmp_path / "t-0", offset).unlink()
    assert state_of(open_log(tmp_path, clock)) == before


def test_truncation_rebuilds_the_state(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=400)
    for seq in range(20):
        log.append_as_leader(idem(seq, value=b"x" * 40), 0)
    log.truncate_to(12)
    assert log.producer_state.last_entry(PID).last_seq == 11
    assert all(o <= 12 for o in snapshot_offsets(tmp_path / "t-0"))
    assert error_of(log, idem(15, value=b"x" * 40)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(idem(11, value=b"x" * 40), 0).duplicate
    assert log.append_as_leader(idem(12, value=b"x" * 40), 0).first_offset == 12
    log.truncate_fully_and_start_at(100)
    assert log.producer_state.producers == {} and snapshot_offsets(tmp_path / "t-0") == []


def test_a_follower_builds_the_same_state(tmp_path, clock):
    leader = open_log(tmp_path, clock)
    follower = Log.open(tmp_path / "f-0", LogConfig(), now_ms=clock.now_ms)
    for seq in range(0, 9, 3):
        leader.append_as_leader(idem(seq, 3), 0)
    leader.append_as_leader(idem(0, pid=5), 0)
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    assert state_of(follower) == state_of(leader)
    # Promoted, it recognises the retry the old leader had taken.
    assert follower.append_as_leader(idem(6, 3), 1).duplicate
    assert values(follower) == values(leader)


def test_retention_removes_old_snapshots_but_keeps_producers(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=400, retention_bytes=0)
    for seq in range(20):
        log.append_as_leader(idem(seq, value=b"x" * 40), 0)
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments() > 0
    assert all(o >= log.log_start_offset for o in snapshot_offsets(tmp_path / "t-0"))
    assert log.producer_state.last_entry(PID).last_seq == 19
