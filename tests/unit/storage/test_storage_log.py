"""Log: appends and reads, rolling, indexes, fetch limits, retention, timestamps, truncation."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError, RecordValidationError
from protocol.records import (
    LOG_APPEND_TIME,
    batch_crc_ok,
    decode_batch,
    encode_batch,
    iter_batches,
)
from storage.log import Log
from storage.log_config import LogConfig


class FakeClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(n: int = 1, size: int = 10, ts: int = 1_000, key: bytes | None = None) -> bytes:
    return encode_batch([(key, b"v" * size, [], ts + i) for i in range(n)])


def open_log(path: Path, clock: FakeClock | None = None, **config) -> Log:
    return Log.open(path / "topic-0", LogConfig(**config), now_ms=clock or FakeClock())


def offsets_of(records: bytes) -> list[int]:
    return [r.offset for pos, _ in iter_batches(records) for r in decode_batch(records, pos)[1]]


def read_all(log: Log, start: int | None = None) -> list[int]:
    offset, out = log.log_start_offset if start is None else start, []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        got = [o for o in offsets_of(data) if o >= offset]
        out += got
        offset = got[-1] + 1
    return out


def test_append_and_read_round_trip(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    infos = [log.append_as_leader(batch(n), leader_epoch=3) for n in (1, 5, 2)]
    assert [(i.first_offset, i.last_offset, i.num_records) for i in infos] == [
        (0, 0, 1), (1, 5, 5), (6, 7, 2),
    ]  # fmt: skip
    assert log.log_end_offset == 8 and log.log_start_offset == 0
    data = log.read(0, 1 << 20).records
    headers = [h for _, h in iter_batches(data)]
    assert [h.base_offset for h in headers] == [0, 1, 6]
    assert {h.partition_leader_epoch for h in headers} == {3}
    assert all(batch_crc_ok(data, pos, h) for pos, h in iter_batches(data))
    assert offsets_of(data) == list(range(8))
    assert infos[1].log_append_time == -1 and infos[1].max_timestamp == 1_004
    assert infos[1].valid_bytes == len(batch(5))


def test_append_accepts_memoryview_and_leaves_input_alone(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    raw = bytearray(batch(2))
    log.append_as_leader(memoryview(raw), 0)
    log.append_as_leader(memoryview(raw), 0)
    assert raw == batch(2)  # offsets were assigned in a copy
    assert read_all(log) == [0, 1, 2, 3]


def test_invalid_produce_records_are_rejected(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=200)
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(batch(1, size=500), 0)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    bad = bytearray(batch())
    bad[-1] ^= 1
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(bytes(bad), 0)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_record_list_larger_than_a_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=100)
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(batch(1, size=200), 0)
    assert info.value.code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1024)
    one = len(batch(1, size=100))
    for _ in range(40):
        log.append_as_leader(batch(1, size=100), 0)
    per_segment = 1024 // one
    assert len(log.segments) == -(-40 // per_segment)
    assert all(s.size <= 1024 for s in log.segments)
    assert [s.base_offset for s in log.segments] == list(range(0, 40, per_segment))
    names = sorted(p.name for p in (tmp_path / "topic-0").iterdir() if p.suffix == ".log")
    assert names[1] == f"{per_segment:020d}.log"
    assert read_all(log) == list(range(40))


def test_roll_on_segment_ms(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, segment_ms=1000)
    log.append_as_leader(batch(), 0)
    clock.now += 1000
    log.append_as_leader(batch(), 0)
    assert len(log.segments) == 1  # not past segment.ms yet
    clock.now += 1
    log.append_as_leader(batch(), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    clock.now += 5000
    log.roll()  # an explicit roll works too; rolling an empty active segment is a no-op
    assert len(log.segments) == 3
    assert log.roll() is log.active_segment and len(log.segments) == 3


def test_index_lookups_after_many_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=256, segment_bytes=64 * 1024)
    for i in range(2000):
        log.append_as_leader(batch(1 + i % 3, size=20), 0)
    assert sum(s.offset_index.entries for s in log.segments) > 100
    for target in (0, 1, 17, 500, 1234, 2999, log.log_end_offset - 1):
        data = log.read(target, 1).records
        first = next(iter_batches(data))[1]
        assert first.base_offset <= target <= first.last_offset
    for segment in log.segments:
        index = segment.offset_index
        for i in range(0, index.entries, 7):
            relative, position = index.entry(i)
            found = segment.translate_offset(segment.base_offset + relative)
            assert found is not None and found[0] == position


def test_read_mid_batch_returns_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), 0)
    log.append_as_leader(batch(4), 0)  # offsets 3..6
    data = log.read(5, 1 << 20)
    assert data.fetch_offset == 5
    assert [h.base_offset for _, h in iter_batches(data.records)] == [3]
    assert offsets_of(data.records) == [3, 4, 5, 6]
    assert data.segment_base_offset == 0 and data.position == len(batch(3))


def test_min_one_message_and_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(3):
        log.append_as_leader(batch(1, size=1000), 0)
    size = len(batch(1, size=1000))
    assert len(log.read(0, 10).records) == size  # first batch even though it exceeds max_bytes
    assert log.read(0, 10, min_one_message=False).records == b""
    assert len(log.read(0, 2 * size + 5).records) == 2 * size  # whole batches only
    assert len(log.read(0, 1 << 20).records) == 3 * size


def test_max_offset_caps_the_read(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(batch(2), 0)
    assert offsets_of(log.read(0, 1 << 20, max_offset=4).records) == [0, 1, 2, 3]
    assert offsets_of(log.read(0, 1 << 20, max_offset=5).records) == [0, 1, 2, 3, 4, 5]
    assert log.read(4, 1 << 20, max_offset=4).records == b""


def test_out_of_range_and_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    assert log.read(2, 100).records == b""
    for offset in (-1, 3):
        with pytest.raises(KafkaError) as info:
            log.read(offset, 100)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_high_watermark_is_clamped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), 0)
    log.high_watermark = 10
    assert log.high_watermark == 3
    log.high_watermark = -5
    assert log.high_watermark == 0


def test_retention_by_bytes_moves_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1024, retention_bytes=2048)
    for _ in range(60):
        log.append_as_leader(batch(1, size=100), 0)
    before = len(log.segments)
    assert log.delete_old_segments() == 0  # nothing is below the high watermark yet
    log.high_watermark = log.log_end_offset
    deleted = log.delete_old_segments()
    assert deleted == before - 3 and log.size_in_bytes <= 2048 + 1024
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert read_all(log) == list(range(log.log_start_offset, 60))
    with pytest.raises(KafkaError):
        log.read(0, 100)
    assert not (tmp_path / "topic-0" / "00000000000000000000.log").exists()


def test_retention_by_time_rolls_and_deletes_everything(tmp_path: Path) -> None:
    clock = FakeClock(now=10_000)
    log = open_log(tmp_path, clock, segment_bytes=1024, retention_ms=5_000)
    for i in range(20):
        log.append_as_leader(batch(1, size=100, ts=1_000 + i), 0)
    log.append_as_leader(batch(1, size=100, ts=9_000), 0)  # lands in the active segment
    log.high_watermark = log.log_end_offset
    before = len(log.segments)
    assert log.delete_old_segments() == before - 1
    assert len(log.segments) == 1 and log.segments[0].max_timestamp == 9_000  # recent data stays
    assert log.log_start_offset == log.segments[0].base_offset
    clock.now = 20_000
    log.delete_old_segments()
    assert len(log.segments) == 1 and log.active_segment.size == 0
    assert log.log_start_offset == log.log_end_offset == 21
    log.append_as_leader(batch(), 0)
    assert read_all(log) == [21]


def test_timestamp_lookup(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2048, index_interval_bytes=100)
    for i in range(50):
        log.append_as_leader(batch(2, ts=1_000 + 10 * i), 0)  # offsets 2i, 2i+1 at ts, ts+1
    assert log.fetch_offset_by_timestamp(0) == (0, 1_000)
    assert log.fetch_offset_by_timestamp(1_001) == (1, 1_001)
    assert log.fetch_offset_by_timestamp(1_002) == (2, 1_010)
    assert log.fetch_offset_by_timestamp(1_255) == (52, 1_260)
    assert log.fetch_offset_by_timestamp(1_491) == (99, 1_491)
    assert log.fetch_offset_by_timestamp(1_492) is None
    assert log.max_timestamp_and_offset() == (99, 1_491)


def test_log_append_time(tmp_path: Path) -> None:
    clock = FakeClock(now=777_000)
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(encode_batch([(None, b"a", [], 5), (None, b"b", [], 9)]), 0)
    assert info.log_append_time == 777_000 and info.max_timestamp == 777_000
    assert info.offset_of_max_timestamp == 0
    data = log.read(0, 1 << 20).records
    header, records = decode_batch(data)
    assert header.timestamp_type == LOG_APPEND_TIME and batch_crc_ok(data, 0, header)
    assert [r.timestamp for r in records] == [777_000, 777_000]
    assert log.fetch_offset_by_timestamp(777_000) == (0, 777_000)


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1024)
    for _ in range(30):
        log.append_as_leader(batch(2, size=50), 0)
    log.high_watermark = 60
    assert log.truncate_to(31)  # mid-batch: the whole batch 30..31 goes
    assert log.log_end_offset == 30 and log.high_watermark == 30
    assert read_all(log) == list(range(30))
    assert not log.truncate_to(40)
    info = log.append_as_leader(batch(1), 0)
    assert info.first_offset == 30
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (100, 100, 1)
    assert log.append_as_leader(batch(), 0).first_offset == 100


def test_append_as_follower_keeps_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batches = encode_batch([(None, b"a", [], 1)] * 3, base_offset=0) + encode_batch(
        [(None, b"b", [], 2)], base_offset=3
    )
    info = log.append_as_follower(batches + batches[:20])  # a torn tail is left for later
    assert info is not None and (info.first_offset, info.last_offset) == (0, 3)
    assert log.log_end_offset == 4
    with pytest.raises(KafkaError):
        log.append_as_follower(encode_batch([(None, b"c", [], 3)], base_offset=2))
    assert read_all(log) == [0, 1, 2, 3]


def test_restart_keeps_everything(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, segment_bytes=1024, index_interval_bytes=64)
    for i in range(50):
        log.append_as_leader(batch(2, size=30, ts=5_000 + i), 0)
    indexes = [(s.offset_index.size_in_bytes, s.time_index.size_in_bytes) for s in log.segments]
    log.close()
    for clean in (True, False):
        log = Log.open(
            tmp_path / "topic-0", LogConfig(segment_bytes=1024, index_interval_bytes=64),
            now_ms=clock, recovery_point=0, clean_shutdown=clean,
        )  # fmt: skip
        assert log.log_end_offset == 100 and read_all(log) == list(range(100))
        assert log.max_timestamp_and_offset() == (99, 5_050)
        assert [(s.offset_index.size_in_bytes, s.time_index.size_in_bytes) for s in log.segments][
            :-1
        ] == indexes[:-1]
        log.close()
    log = _reopen(tmp_path, segment_bytes=1024, index_interval_bytes=64)
    assert log.append_as_leader(batch(), 0).first_offset == 100


def _reopen(path: Path, **config) -> Log:
    return Log.open(path / "topic-0", LogConfig(**config), now_ms=FakeClock())


def test_recovery_from_truncated_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(batch(3), 0)
    log.close()
    segment = tmp_path / "topic-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 7)
    log = _reopen(tmp_path)
    assert log.log_end_offset == 12 and log.size_in_bytes == 4 * len(batch(3))
    assert log.append_as_leader(batch(), 0).first_offset == 12
    assert read_all(log) == list(range(13))


def test_recovery_from_corrupt_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600)
    for _ in range(10):
        log.append_as_leader(batch(2, size=40), 0)
    segments = len(log.segments)
    assert segments > 2
    log.close()
    second = tmp_path / "topic-0" / f"{log.segments[1].base_offset:020d}.log"
    with open(second, "r+b") as f:  # flip a byte inside the second batch's records
        f.seek(len(batch(2, size=40)) + 70)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x55]))
    log = _reopen(tmp_path, segment_bytes=600)
    first_segment_records = log.segments[0].next_offset
    assert len(log.segments) == 2  # later segments were deleted
    assert log.log_end_offset == first_segment_records + 2
    assert read_all(log) == list(range(log.log_end_offset))


def test_recovery_from_garbage_length(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    log.close()
    with open(tmp_path / "topic-0" / "00000000000000000000.log", "ab") as f:
        f.write(struct.pack(">qi", 2, 3) + b"\x00" * 100)  # a length no batch can have
    log = _reopen(tmp_path)
    assert log.log_end_offset == 2 and log.size_in_bytes == len(batch(2))


def test_missing_and_garbage_indexes_are_rebuilt(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=4096, index_interval_bytes=100)
    for _ in range(100):
        log.append_as_leader(batch(1, size=60), 0)
    expected = {
        s.base_offset: (bytes(s.offset_index._buf), bytes(s.time_index._buf)) for s in log.segments
    }
    log.close()
    folder = tmp_path / "topic-0"
    (folder / "00000000000000000000.index").unlink()
    (folder / "00000000000000000000.timeindex").write_bytes(b"\x07" * 13)
    second = sorted(folder.glob("*.index"))[0]
    second.write_bytes(bytes(range(16)))  # well-formed size, wrong content
    log = Log.open(
        folder, LogConfig(segment_bytes=4096, index_interval_bytes=100), now_ms=FakeClock(),
        recovery_point=100, clean_shutdown=True,
    )  # fmt: skip
    got = {
        s.base_offset: (bytes(s.offset_index._buf), bytes(s.time_index._buf)) for s in log.segments
    }
    assert got == expected
    assert read_all(log) == list(range(100))


def test_timestamp_difference_limit(tmp_path: Path) -> None:
    clock = FakeClock(now=100_000)
    log = open_log(tmp_path, clock, message_timestamp_difference_max_ms=1_000)
    log.append_as_leader(batch(ts=99_500), 0)
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(batch(ts=50_000), 0)
    assert info.value.code == ErrorCode.INVALID_TIMESTAMP
    assert log.log_end_offset == 1


def test_compacted_topics_skip_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1024, retention_bytes=0, cleanup_policy="compact")
    for _ in range(20):
        log.append_as_leader(batch(1, size=100, key=b"k"), 0)
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments() == 0 and log.log_start_offset == 0


@pytest.mark.parametrize("compression", [0, 1, 4])  # none, gzip, zstd
def test_max_timestamp_is_the_first_record_carrying_it_inside_its_batch(
    tmp_path: Path, compression: int
) -> None:
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=1)
    # Offsets 0-3: the max (9_000) sits mid-batch, twice; later batches and segments stay below.
    log.append_as_leader(encode_batch([(None, b"a", [], 5_000), (None, b"b", [], 9_000),
                                       (None, b"c", [], 9_000), (None, b"d", [], 6_000)],
                                      compression=compression), 0)
    for i in range(12):
        log.append_as_leader(encode_batch([(None, b"x" * 40, [], 7_000 + i)] * 2,
                                          compression=compression), 0)
    assert len(log.segments) > 2
    assert log.max_timestamp_and_offset() == (1, 9_000)
    # A later segment's batch takes over only with a strictly larger timestamp (Kafka's maxBy).
    log.append_as_leader(encode_batch([(None, b"e", [], 9_000), (None, b"f", [], 9_500),
                                       (None, b"g", [], 1)], compression=compression), 0)
    assert log.max_timestamp_and_offset() == (log.log_end_offset - 2, 9_500)


def test_max_timestamp_with_log_append_time_is_the_batch_first_offset(tmp_path: Path) -> None:
    clock = FakeClock(now=777_000)
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    log.append_as_leader(batch(3, ts=1), 0)
    clock.now = 778_000
    log.append_as_leader(batch(4, ts=2), 0)
    assert log.max_timestamp_and_offset() == (3, 778_000)


def test_keyless_records_on_a_compacted_topic_are_named_by_their_index(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy="compact")
    records = encode_batch([(b"k", b"a", [], 1), (None, b"b", [], 1), (b"k", b"c", [], 1),
                            (None, b"d", [], 1)])
    with pytest.raises(RecordValidationError) as info:
        log.append_as_leader(records, 0)
    message = "Compacted topic cannot accept message without key in topic partition topic-0"
    assert info.value.code == ErrorCode.INVALID_RECORD
    assert info.value.record_errors == [(1, message), (3, message)]
    assert info.value.message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing "
        f"the first three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=3, message='{message}')]")
    assert log.log_end_offset == 0


def test_a_producer_id_without_a_sequence_is_refused_before_its_records(tmp_path: Path) -> None:
    """Kafka checks the batch (its sequence) before its records (their keys): one error, no
    record errors."""
    log = open_log(tmp_path, cleanup_policy="compact")
    records = encode_batch([(None, b"a", [], 1)], producer_id=5, producer_epoch=0)
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(records, 0)
    assert not isinstance(info.value, RecordValidationError)
    assert (info.value.code, info.value.message) == (ErrorCode.INVALID_RECORD, (
        "Invalid sequence number -1 in record batch with producerId 5 in topic partition "
        "topic-0."))
    assert log.log_end_offset == 0


def test_timestamp_bounds_before_and_after_kip_937(tmp_path: Path) -> None:
    clock = FakeClock(now=100_000)
    log = open_log(tmp_path, clock, message_timestamp_before_max_ms=1_000)
    log.append_as_leader(encode_batch([(None, b"a", [], 99_000), (None, b"b", [], 10**12)]), 0)
    with pytest.raises(RecordValidationError) as info:
        log.append_as_leader(encode_batch([(None, b"a", [], 99_500), (None, b"b", [], 98_999)]), 0)
    assert info.value.code == ErrorCode.INVALID_TIMESTAMP
    assert info.value.message == "One or more records have been rejected due to invalid timestamp"
    # The upper bound is now + Long.MAX_VALUE, which Kafka's message prints wrapped around.
    assert info.value.record_errors == [(1, "Timestamp 98999 of message with offset 1 is out of "
                                           "range. The timestamp should be within [99000, "
                                           "-9223372036854675809]")]
    after = open_log(tmp_path / "after", clock, message_timestamp_after_max_ms=500,
                     message_timestamp_difference_max_ms=2_000)
    after.append_as_leader(encode_batch([(None, b"a", [], 98_000), (None, b"b", [], 100_500)]), 0)
    for ts in (100_501, 97_999):  # after: its own bound; before: the difference's
        with pytest.raises(RecordValidationError):
            after.append_as_leader(encode_batch([(None, b"a", [], ts)]), 0)
    assert (log.log_end_offset, after.log_end_offset) == (2, 2)
