"""FileHandleCache: segment descriptors stay within the bound however many logs and segments there
are; evicted segments reopen on use; scans and cleaner snapshots survive evictions."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from protocol.records import decode_batch, encode_batch, iter_batches
from storage.file_handles import FileHandleCache
from storage.log_config import LogConfig
from storage.log_manager import LogManager


def now() -> int:
    return 1_000_000


def batch(value: bytes) -> bytes:
    return encode_batch([(None, value, [], 900_000)])


def values(records: bytes) -> list[bytes]:
    return [r.value for pos, _ in iter_batches(records) for r in decode_batch(records, pos)[1]]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_logs_stay_within_the_bound_and_read_back(tmp_path: Path) -> None:
    # The process's descriptors are counted: what earlier tests left to the garbage collector
    # (an event loop is three) is closed first, not in the middle of this one.
    gc.collect()
    before = open_fds()
    m = LogManager(tmp_path, LogConfig(segment_bytes=200), now_ms=now, max_open_files=4)
    m.load()
    logs = [m.create_log("t", p) for p in range(30)]
    for round_ in range(3):  # 3 segments per log (a batch of ~100 bytes fills one)
        for p, log in enumerate(logs):
            log.append_as_leader(batch(b"%d-%d" % (p, round_) + b"x" * 60), 0)
    assert len(m.files) <= 4 and m.files.peak == 4
    assert open_fds() - before <= 4
    for p, log in enumerate(logs):  # every segment of every log reopens on use
        got = [values(log.read(offset, 1 << 20).records)[0] for offset in range(3)]
        assert got == [b"%d-%d" % (p, r) + b"x" * 60 for r in range(3)]
    assert len(m.files) <= 4
    m.shutdown()
    assert len(m.files) == 0 and open_fds() == before

    m = LogManager(tmp_path, LogConfig(segment_bytes=200), now_ms=now, max_open_files=4)
    m.load()  # 90 segments loaded through 4 descriptors
    assert m.files.peak <= 4 and len(m.all_logs()) == 30
    assert values(m.get_log("t", 29).read(2, 1 << 20).records) == [b"29-2" + b"x" * 60]
    m.shutdown()


def test_inactive_segments_hold_no_descriptor(tmp_path: Path) -> None:
    m = LogManager(tmp_path, LogConfig(segment_bytes=200), now_ms=now)
    m.load()
    log = m.create_log("t", 0)
    for _ in range(5):
        log.append_as_leader(batch(b"x" * 100), 0)
    *old, active = log.segments
    assert len(old) == 4 and not any(s._file.is_open for s in old) and active._file.is_open
    log.read(0, 1 << 20)  # a read opens the file again, until evicted or rolled past
    assert old[0]._file.is_open
    m.shutdown()


def test_a_suspended_scan_survives_its_descriptor_being_evicted(tmp_path: Path) -> None:
    m = LogManager(tmp_path, LogConfig(), now_ms=now, max_open_files=1)
    m.load()
    files = m.files
    a, b = m.create_log("a", 0), m.create_log("b", 0)
    for i in range(50):
        a.append_as_leader(batch(b"a%d" % i), 0)
        b.append_as_leader(batch(b"b%d" % i), 0)
    scan = a.active_segment.batches(chunk_size=100)  # reads a chunk at a time
    first = next(scan)
    assert b.read(0, 1 << 20).records  # evicts a's descriptor (the cache holds one)
    assert not a.active_segment._file.is_open
    rest = list(scan)
    assert [h.base_offset for _, h, _ in [first, *rest]] == list(range(50))
    assert files.peak == 1
    m.shutdown()


def test_a_cleaner_snapshot_reads_after_eviction_and_deletion(tmp_path: Path) -> None:
    m = LogManager(tmp_path, LogConfig(segment_bytes=200), now_ms=now, max_open_files=1)
    m.load()
    log = m.create_log("t", 0)
    for i in range(3):
        log.append_as_leader(batch(b"%d" % i + b"x" * 100), 0)
    snapshot = log.segments[0].snapshot()
    m.create_log("u", 0).append_as_leader(batch(b"other"), 0)  # the cache's one slot moves on
    log.high_watermark = log.log_end_offset
    log.increment_log_start_offset(1)  # the snapshot's segment is deleted
    assert log.segments[0].base_offset == 1 and not snapshot.is_current()
    [(_, header, view)] = list(snapshot.batches())
    assert header.base_offset == 0 and values(bytes(view)) == [b"0" + b"x" * 100]
    snapshot.close()
    m.shutdown()


def test_the_bound_must_allow_one_file() -> None:
    with pytest.raises(ValueError):
        FileHandleCache(0)


def test_out_of_descriptors_the_cache_gives_one_back(tmp_path: Path) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = FileHandleCache(1000)
    paths = [tmp_path / f"{i}.log" for i in range(40)]
    handles = [files.file(p, os.O_RDWR | os.O_CREAT) for p in paths]
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_fds() + 10, hard))
    try:
        for handle in handles:  # more files than the process may open: the oldest are closed
            os.write(handle.fd(), b"x")
        assert len(files) < 20
    finally:
        files.close_all()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert all(p.read_bytes() == b"x" for p in paths)
