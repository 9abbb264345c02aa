"""LogCleaner: compaction to the latest value per key, tombstones, offsets and producer state kept,
crash-safe swaps, null keys refused at produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.records import GZIP, Record, batch_crc_ok, decode_batch, encode_batch, iter_batches
from storage.log import Log
from storage.log_cleaner import LogCleaner
from storage.log_config import LogConfig
from storage.naming import CLEANER_CHECKPOINT

T0 = 1_000_000


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def kv(key: bytes | None, value: bytes | None, ts: int = T0, **kwargs) -> bytes:
    return encode_batch([(key, value, [], ts)], **kwargs)


def open_log(path: Path, clock: FakeClock, **config) -> Log:
    defaults = {"cleanup_policy": "compact", "segment_bytes": 300}
    return Log.open(path / "topic-0", LogConfig(**{**defaults, **config}), now_ms=clock)


def read_records(log: Log) -> list[Record]:
    """Every record from the log start, through Log.read and decode_batch, CRCs checked."""
    offset, out = log.log_start_offset, []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        if not data:
            break
        for pos, header in iter_batches(data):
            assert batch_crc_ok(data, pos, header)
            out += [r for r in decode_batch(data, pos)[1] if r.offset >= offset]
            offset = header.next_offset
    return out


def latest(log: Log) -> dict[bytes | None, bytes | None]:
    return {r.key: r.value for r in read_records(log)}


def fill(log: Log, updates: list[tuple[bytes | None, bytes | None]]) -> None:
    for key, value in updates:
        log.append_as_leader(kv(key, value), leader_epoch=0)
    log.high_watermark = log.log_end_offset


def clean(log: Log, tmp_path: Path, clock: FakeClock, **kwargs):
    return LogCleaner(tmp_path, clock).clean(log, None, force=True, **kwargs)


def test_keys_compacted_to_latest_across_segments_active_untouched(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    updates = [(b"k%d" % (i % 3), b"v%d" % i) for i in range(30)]
    fill(log, updates)
    assert len(log.segments) > 3
    active = log.active_segment
    active_before = [(r.offset, r.key, r.value) for r in read_records(log)
                     if r.offset >= active.base_offset]
    expected = dict(updates)
    before_size = log.size_in_bytes
    stats = clean(log, tmp_path, clock)
    assert stats is not None and stats.records_kept == 3
    assert log.size_in_bytes < before_size
    segments = len(log.segments)
    again = clean(log, tmp_path, clock)  # now small, adjacent cleaned segments are grouped
    assert again is not None and again.segments_written < again.segments_cleaned
    assert len(log.segments) < segments
    assert log.active_segment is active  # never the active segment
    records = read_records(log)
    assert [(r.offset, r.key, r.value) for r in records if r.offset >= active.base_offset] \
        == active_before
    cleaned = [r for r in records if r.offset < active.base_offset]
    assert len({r.key for r in cleaned}) == len(cleaned)  # one record per key below the active
    # every record kept below the active segment is its key's latest there
    for r in cleaned:
        later = [o for o, (k, _) in enumerate(updates) if k == r.key and o < active.base_offset]
        assert r.offset == max(later)
        assert r.value == updates[r.offset][1]
    assert latest(log) == expected
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))  # offsets kept: monotonic, gaps only
    assert log.log_end_offset == 30 and log.log_start_offset == 0


def test_cleaning_respects_high_watermark_checkpoint_and_ratio(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    fill(log, [(b"k", b"v%d" % i) for i in range(20)])
    log.high_watermark = 0
    cleaner = LogCleaner(tmp_path, clock)
    assert cleaner.clean_logs({("topic", 0): log}) == 0  # nothing below the high watermark
    log.high_watermark = log.log_end_offset
    assert cleaner.clean_logs({("topic", 0): log}) == 1
    checkpoint = (tmp_path / CLEANER_CHECKPOINT).read_text().split()
    assert checkpoint[-3:] == ["topic", "0", str(log.active_segment.base_offset)]
    assert cleaner.clean_logs({("topic", 0): log}) == 0  # nothing dirty left
    assert latest(log) == {b"k": b"v19"}


def test_min_compaction_lag_holds_recent_segments(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, min_compaction_lag_ms=10_000)
    fill(log, [(b"k", b"v%d" % i) for i in range(20)])
    assert clean(log, tmp_path, clock) is None  # records at T0, now T0: too recent
    assert clean(log, tmp_path, clock, now_ms=T0 + 20_000) is not None


def test_tombstones_kept_then_removed_after_delete_retention(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, delete_retention_ms=1000)
    fill(log, [(b"a", b"1"), (b"b", b"1"), (b"a", None)] + [(b"c", b"%d" % i) for i in range(20)])
    clean(log, tmp_path, clock, now_ms=T0 + 10)
    assert latest(log)[b"a"] is None and b"a" in latest(log)  # the tombstone stays for now
    assert [r.value for r in read_records(log) if r.key == b"a"] == [None]
    stats = clean(log, tmp_path, clock, now_ms=T0 + 5000)
    assert stats is not None and stats.tombstones_removed == 1
    assert b"a" not in latest(log)
    assert latest(log)[b"b"] == b"1"


def test_null_key_refused_at_produce_for_compacted_topics(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(kv(None, b"v"), leader_epoch=0)
    assert info.value.code == ErrorCode.INVALID_RECORD
    mixed = encode_batch([(b"k", b"v", [], T0), (None, b"v", [], T0)], compression=GZIP)
    with pytest.raises(KafkaError):
        log.append_as_leader(mixed, leader_epoch=0)
    assert log.log_end_offset == 0
    plain = open_log(tmp_path / "plain", clock, cleanup_policy="delete")
    plain.append_as_leader(kv(None, b"v"), leader_epoch=0)  # fine for a delete topic


def test_multi_record_compressed_batches_keep_offsets_and_codec(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, segment_bytes=400)
    for i in range(10):
        batch = encode_batch([(b"k%d" % j, b"v%d-%d" % (i, j), [("h", b"x")], T0 + i)
                              for j in range(4)], compression=GZIP)
        log.append_as_leader(batch, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    before = {r.offset: r for r in read_records(log)}
    clean(log, tmp_path, clock)
    data = log.read(0, 1 << 20).records
    for pos, header in iter_batches(data):
        assert header.compression == GZIP and batch_crc_ok(data, pos, header)
        assert header.last_offset_delta == 3  # the original range stays
    for r in read_records(log):
        assert (r.key, r.value, r.timestamp, r.headers) == (
            before[r.offset].key, before[r.offset].value, before[r.offset].timestamp,
            before[r.offset].headers)


def test_crash_before_swap_discards_cleaned_file(tmp_path: Path, monkeypatch) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    fill(log, [(b"k%d" % (i % 2), b"v%d" % i) for i in range(20)])
    expected = [(r.offset, r.key, r.value) for r in read_records(log)]

    def crash(*_args) -> None:
        raise OSError("crash")

    monkeypatch.setattr(LogCleaner, "swap", staticmethod(crash))
    with pytest.raises(OSError):
        clean(log, tmp_path, clock)
    assert list(log.directory.glob("*.cleaned"))
    reopened = Log.open(log.directory, log.config, now_ms=clock)
    assert not list(log.directory.glob("*.cleaned"))
    assert [(r.offset, r.key, r.value) for r in read_records(reopened)] == expected


@pytest.mark.parametrize("crash_after_deleting", [0, 1])
def test_crash_after_swap_is_finished_on_load(
    tmp_path: Path, monkeypatch, crash_after_deleting: int
) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    updates = [(b"k%d" % (i % 2), b"v%d" % i) for i in range(20)]
    fill(log, updates)
    end = log.log_end_offset

    def crash(self, old, swap, *_layout) -> None:
        for segment in old[:crash_after_deleting]:
            segment.delete()
        raise OSError("crash")

    monkeypatch.setattr(Log, "replace_segments", crash)
    with pytest.raises(OSError):
        clean(log, tmp_path, clock)
    assert list(log.directory.glob("*.swap"))
    monkeypatch.undo()
    reopened = Log.open(log.directory, log.config, now_ms=clock)
    assert not list(log.directory.glob("*.swap"))
    assert reopened.log_end_offset == end
    assert latest(reopened) == dict(updates)
    records = read_records(reopened)
    assert len(records) < len(updates)  # the swapped group is the cleaned one
    assert [r.offset for r in records if r.offset < 3] == []  # its superseded records went
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))


def test_idempotent_producer_state_survives_cleaning(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    pid = 7
    batches = [kv(b"k", b"v%d" % seq, producer_id=pid, producer_epoch=0, base_sequence=seq)
               for seq in range(20)]
    for b in batches:
        log.append_as_leader(b, leader_epoch=0)
    log.roll()  # the producer's last batch is now in an inactive segment
    log.append_as_leader(kv(b"other", b"x"), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    stats = clean(log, tmp_path, clock)
    assert stats is not None and stats.records_kept == 1
    # every batch of key k is superseded but the producer's last (it holds the latest value)
    assert latest(log) == {b"k": b"v19", b"other": b"x"}
    # a retry of the last batch is still a duplicate, also after a reload from the log alone
    info = log.append_as_leader(batches[-1], leader_epoch=0)
    assert info.duplicate and info.first_offset == 19
    log.close()
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    reopened = Log.open(log.directory, log.config, now_ms=clock)
    assert reopened.producer_state.last_entry(pid).last_seq == 19
    assert reopened.append_as_leader(batches[-1], leader_epoch=0).duplicate
    nxt = kv(b"k", b"v20", producer_id=pid, producer_epoch=0, base_sequence=20)
    assert not reopened.append_as_leader(nxt, leader_epoch=0).duplicate


def test_producer_last_batch_kept_empty_when_all_records_superseded(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    log.append_as_leader(kv(b"k", b"old", producer_id=3, producer_epoch=0, base_sequence=0),
                         leader_epoch=0)
    fill(log, [(b"k", b"v%d" % i) for i in range(20)])
    clean(log, tmp_path, clock)
    data = log.read(0, 1 << 20).records
    first = next(h for _, h in iter_batches(data))
    assert (first.base_offset, first.record_count, first.producer_id) == (0, 0, 3)
    assert log.producer_state.last_entry(3).last_seq == 0
    assert b"old" not in latest(log).values()


def test_log_with_a_malformed_record_is_left_uncleanable_and_others_are_cleaned(
    tmp_path: Path,
) -> None:
    """A stored batch whose CRC holds but whose record cannot be read (a header key length of -4
    used to walk the decoder backwards forever) makes that log uncleanable, as Kafka's cleaner
    does, and the pass goes on with the other logs; no half-written .cleaned file stays."""
    from tests.unit.protocol.test_records_hostile import ATTRS, batch_with_records_blob, record

    clock = FakeClock()
    bad = open_log(tmp_path / "bad", clock)
    fill(bad, [(b"k", b"v%d" % i) for i in range(10)])
    hostile = bytearray(batch_with_records_blob(
        record(ATTRS, 0, 0, 1, b"k", -1, 2**31 - 1, -4, b"", -1), 1))
    hostile[:8] = bad.log_end_offset.to_bytes(8, "big")  # outside the CRC
    bad.append_as_follower(bytes(hostile))
    fill(bad, [(b"k", b"w%d" % i) for i in range(10)])
    good = open_log(tmp_path / "good", clock)
    fill(good, [(b"k", b"v%d" % i) for i in range(20)])
    cleaner = LogCleaner(tmp_path, clock)
    assert cleaner.clean_logs({("bad", 0): bad, ("good", 0): good}, force=True) == 1
    assert "invalid" in cleaner.uncleanable[("bad", 0)].lower()
    assert latest(good) == {b"k": b"v19"}
    assert not list((tmp_path / "bad").rglob("*.cleaned"))
    assert cleaner.clean_logs({("bad", 0): bad, ("good", 0): good}, force=True) <= 1
    assert ("good", 0) not in cleaner.uncleanable


def test_one_log_failing_is_marked_uncleanable_and_the_pass_goes_on(tmp_path: Path) -> None:
    clock = FakeClock()
    logs = {}
    for name in ("bad", "good"):
        log = Log.open(tmp_path / f"{name}-0", LogConfig(cleanup_policy="compact", segment_bytes=300),
                       now_ms=clock)
        fill(log, [(b"k", b"v%d" % i) for i in range(20)])
        logs[(name, 0)] = log
    cleaner = LogCleaner(tmp_path, clock)
    original = cleaner.filter_batch
    calls = 0

    def failing_once(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == 1:  # the first batch of the first log: as a batch it cannot decode would
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "injected")
        return original(*args, **kwargs)

    cleaner.filter_batch = failing_once
    assert cleaner.clean_logs(logs, force=True) == 1  # "good" was cleaned all the same
    assert set(cleaner.uncleanable) == {("bad", 0)}
    assert set(cleaner.stats) == {("good", 0)}
    assert latest(logs[("good", 0)]) == {b"k": b"v19"}
    assert len(read_records(logs[("bad", 0)])) == 20  # untouched
    assert not list((tmp_path / "bad-0").glob("*.cleaned"))  # the half-written file went
    checkpoint = (tmp_path / CLEANER_CHECKPOINT).read_text()
    assert "good 0" in checkpoint and "bad 0" not in checkpoint

    cleaner.filter_batch = original
    assert cleaner.clean_logs(logs, force=True) == 0  # skipped from now on
    cleaner.forget(("bad", 0))  # deleted (and recreated): cleanable again
    assert cleaner.clean_logs(logs, force=True) == 1
    assert latest(logs[("bad", 0)]) == {b"k": b"v19"}
    assert cleaner.clean_logs({("good", 0): logs[("good", 0)]}, force=True) == 0


def run_pass_with_the_loop_acting_meanwhile(tmp_path: Path, clock: FakeClock, log: Log, meanwhile):
    """A pass driven as the broker drives it, whose compute step (in its worker thread) waits until `meanwhile()` has run
    on the loop; returns (logs cleaned, the compute step's thread, the loop's thread)."""
    import asyncio
    import threading

    from broker.server.worker_steps import run_steps_in_worker

    cleaner = LogCleaner(tmp_path, clock)
    started, release = threading.Event(), threading.Event()
    threads: list[int] = []
    compute = cleaner.compute

    def blocking_compute(job):
        threads.append(threading.get_ident())
        started.set()
        assert release.wait(10)
        compute(job)

    cleaner.compute = blocking_compute

    async def scenario():
        steps = cleaner.clean_logs_stepwise({("topic", 0): log}, force=True)
        task = asyncio.ensure_future(run_steps_in_worker(steps))
        assert await asyncio.to_thread(started.wait, 10)
        meanwhile()  # the loop goes on with the log while the worker reads the snapshots
        release.set()
        return await task, threading.get_ident()

    cleaned, loop_thread = asyncio.run(scenario())
    return cleaner, cleaned, threads[0], loop_thread


def test_a_pass_computes_in_a_worker_thread_while_the_log_takes_appends(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    fill(log, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(30)])
    end = log.log_end_offset

    def append_more():
        fill(log, [(b"k0", b"late"), (b"k9", b"new")])

    cleaner, cleaned, worker, loop_thread = run_pass_with_the_loop_acting_meanwhile(
        tmp_path, clock, log, append_more)
    assert cleaned == 1 and worker != loop_thread
    assert latest(log) == {b"k0": b"late", b"k1": b"v28", b"k2": b"v29", b"k9": b"new"}
    assert [r.offset for r in read_records(log)][-2:] == [end, end + 1]
    assert len(read_records(log)) < 32  # compacted below the old active segment
    assert not list((tmp_path / "topic-0").glob("*.cleaned"))
    assert not list((tmp_path / "topic-0").glob("*.swap"))


def test_a_log_truncated_during_a_pass_is_not_swapped_into(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    fill(log, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(30)])

    cleaner, cleaned, _, _ = run_pass_with_the_loop_acting_meanwhile(
        tmp_path, clock, log, lambda: log.truncate_to(5))  # a follower truncating under it
    assert cleaned == 0
    assert cleaner.uncleanable == {}  # not the log's fault: the next pass may clean it
    assert [r.value for r in read_records(log)] == [b"v%d" % i for i in range(5)]
    assert not list((tmp_path / "topic-0").glob("*.cleaned"))
    assert not list((tmp_path / "topic-0").glob("*.swap"))
    assert not (tmp_path / CLEANER_CHECKPOINT).exists() or \
        "topic 0" not in (tmp_path / CLEANER_CHECKPOINT).read_text()


def test_a_stepwise_pass_isolates_a_failing_step_and_cleans_up_when_cancelled(tmp_path: Path) -> None:
    import asyncio
    import threading

    from broker.server.worker_steps import run_steps_in_worker

    clock = FakeClock()
    logs = {}
    for name in ("bad", "good"):
        log = Log.open(tmp_path / f"{name}-0", LogConfig(cleanup_policy="compact", segment_bytes=300),
                       now_ms=clock)
        fill(log, [(b"k", b"v%d" % i) for i in range(20)])
        logs[(name, 0)] = log
    cleaner = LogCleaner(tmp_path, clock)
    compute = cleaner.compute

    def failing_for_bad(job):
        if job.log is logs[("bad", 0)]:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "injected: undecodable batch")
        compute(job)

    cleaner.compute = failing_for_bad
    assert asyncio.run(run_steps_in_worker(cleaner.clean_logs_stepwise(logs, force=True))) == 1
    assert set(cleaner.uncleanable) == {("bad", 0)} and set(cleaner.stats) == {("good", 0)}

    # Cancelled while a step runs (the broker stops): the step finishes, then its files go.
    cleaner = LogCleaner(tmp_path / "second", clock)
    fill(logs[("good", 0)], [(b"k", b"again%d" % i) for i in range(20)])
    started, release = threading.Event(), threading.Event()

    def blocking(job):
        started.set()
        assert release.wait(10)
        compute(job)

    cleaner.compute = blocking

    async def scenario():
        steps = cleaner.clean_logs_stepwise({("good", 0): logs[("good", 0)]}, force=True)
        task = asyncio.ensure_future(run_steps_in_worker(steps))
        assert await asyncio.to_thread(started.wait, 10)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        steps_closed = steps.gi_frame is None
        release.set()
        while steps.gi_frame is not None:  # closed by the step's done callback, on this loop
            await asyncio.to_thread(lambda: None)
        return steps_closed

    assert asyncio.run(scenario()) is False  # not closed while its step was still running
    assert not list((tmp_path / "good-0").glob("*.cleaned"))
    assert cleaner.in_progress == set()


def test_a_stepwise_pass_fsyncs_off_the_loop_and_its_swap_before_a_source_goes(
    tmp_path: Path, monkeypatch
) -> None:
    import asyncio
    import os
    import threading

    from broker.server.worker_steps import run_steps_in_worker
    from storage.log_flusher import LogFlusher

    clock = FakeClock()
    flusher = LogFlusher()
    log = Log.open(tmp_path / "topic-0", LogConfig(cleanup_policy="compact", segment_bytes=300),
                   now_ms=clock, flusher=flusher)
    fill(log, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(30)])
    flusher.drain()
    sources = {s.path.name for s in log.segments[:-1]}
    events: list[tuple[str, str, int]] = []  # (what, file name, thread)
    fsync, unlink, replace = os.fsync, os.unlink, os.replace

    def recording_fsync(fd: int) -> None:  # observes the real calls, which still run
        events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}")),
                       threading.get_ident()))
        fsync(fd)

    def recording_unlink(path, *args, **kwargs) -> None:
        events.append(("unlink", os.path.basename(path), threading.get_ident()))
        unlink(path, *args, **kwargs)

    def recording_replace(src, dst, *args, **kwargs) -> None:
        events.append(("rename", os.path.basename(dst), threading.get_ident()))
        replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "unlink", recording_unlink)
    monkeypatch.setattr(os, "replace", recording_replace)
    cleaner = LogCleaner(tmp_path, clock)

    async def scenario() -> tuple[int, int]:
        cleaned = await run_steps_in_worker(cleaner.clean_logs_stepwise({("topic", 0): log},
                                                                        force=True))
        await asyncio.to_thread(flusher.drain)
        return cleaned, threading.get_ident()

    cleaned, loop_thread = asyncio.run(scenario())
    monkeypatch.undo()
    flusher.close()
    assert cleaned == 1
    fsyncs = [e for e in events if e[0] == "fsync"]
    # The `.cleaned` file, the folder after its rename to `.swap`, the folder and index files
    # after the swap, the cleaner checkpoint: all of them, none on the loop's thread.
    assert "topic-0" in {name for _, name, _ in fsyncs}
    assert any(name.startswith(CLEANER_CHECKPOINT) for _, name, _ in fsyncs)  # its temp file
    assert any(name.endswith(".index") for _, name, _ in fsyncs)
    assert loop_thread not in {thread for _, _, thread in fsyncs}
    staged = next(i for i, e in enumerate(events) if e[0] == "rename" and e[1].endswith(".swap"))
    first_source_gone = next(i for i, e in enumerate(events)
                             if e[0] == "unlink" and e[1] in sources)
    assert any(e[:2] == ("fsync", "topic-0") for e in events[staged:first_source_gone])
    assert latest(log) == {b"k0": b"v27", b"k1": b"v28", b"k2": b"v29"}
    assert not list(log.directory.glob("*.swap")) and not list(log.directory.glob("*.cleaned"))


def test_a_log_truncated_while_its_swap_is_fsynced_loses_the_swap_file_at_once(
    tmp_path: Path, monkeypatch
) -> None:
    import asyncio
    import threading

    import storage.log_cleaner as log_cleaner
    from broker.server.worker_steps import run_steps_in_worker

    clock = FakeClock()
    log = open_log(tmp_path, clock)
    fill(log, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(30)])
    started, release = threading.Event(), threading.Event()
    fsync_dir = log_cleaner.fsync_dir

    def blocking_fsync_dir(directory: Path) -> None:
        started.set()
        assert release.wait(10)
        fsync_dir(directory)

    monkeypatch.setattr(log_cleaner, "fsync_dir", blocking_fsync_dir)
    cleaner = LogCleaner(tmp_path, clock)

    async def scenario() -> tuple[int, list[Path]]:
        task = asyncio.ensure_future(run_steps_in_worker(
            cleaner.clean_logs_stepwise({("topic", 0): log}, force=True)))
        assert await asyncio.to_thread(started.wait, 10)
        staged = list(log.directory.glob("*.swap"))
        log.truncate_to(5)  # a follower: a crash from here on must not bring the swap back
        assert not list(log.directory.glob("*.swap"))
        release.set()
        return await task, staged

    cleaned, staged = asyncio.run(scenario())
    assert staged and cleaned == 0 and cleaner.uncleanable == {}
    assert [r.value for r in read_records(log)] == [b"v%d" % i for i in range(5)]
    assert not list(log.directory.glob("*.swap")) and not list(log.directory.glob("*.cleaned"))


def test_a_swap_indexes_the_cleaned_file_from_the_cleaners_layout_as_recovery_would(
    tmp_path: Path, monkeypatch
) -> None:
    from storage.segment import LogSegment

    clock = FakeClock()
    log = open_log(tmp_path, clock, index_interval_bytes=1)
    fill(log, [(b"k%d" % (i % 4), b"v%d" % i * 5) for i in range(60)])
    recover = LogSegment.recover

    def unexpected(segment) -> int:
        raise AssertionError("the swap read its cleaned file back")

    monkeypatch.setattr(LogSegment, "recover", unexpected)
    assert clean(log, tmp_path, clock) is not None
    monkeypatch.undo()
    indexed = [(bytes(s.offset_index._buf), bytes(s.time_index._buf), s.next_offset,
                s.max_timestamp) for s in log.segments[:-1]]
    assert any(entries for entries, _, _, _ in indexed)
    for segment in log.segments[:-1]:
        recover(segment)  # what reading the file back builds...
        segment.seal()  # ...with the final time index entry of an inactive segment
    assert indexed == [(bytes(s.offset_index._buf), bytes(s.time_index._buf), s.next_offset,
                        s.max_timestamp) for s in log.segments[:-1]]
    assert latest(log) == {b"k0": b"v56" * 5, b"k1": b"v57" * 5, b"k2": b"v58" * 5,
                           b"k3": b"v59" * 5}
