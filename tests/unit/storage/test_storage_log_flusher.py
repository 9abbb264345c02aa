"""LogFlusher: durability work in a worker thread. The recovery point moves only after its flush
ran, a truncation voids flushes and snapshots in flight, a superseded leader-epoch checkpoint is
not written, a deleted log's jobs are dropped, and shutdown waits for everything queued."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from protocol.records import encode_batch
from storage.checkpoint import OffsetCheckpointFile
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import KafkaStorageError
from storage.log_flusher import LogFlusher
from storage.log_manager import LogManager


def now() -> int:
    return 1_000_000


def batch() -> bytes:
    return encode_batch([(None, b"x" * 100, [], 900_000)])


def manager(path: Path) -> tuple[LogManager, LogFlusher, list[BaseException]]:
    errors: list[BaseException] = []
    flusher = LogFlusher(on_error=errors.append)
    m = LogManager(path, LogConfig(segment_bytes=200), now_ms=now, flusher=flusher)
    m.load()
    return m, flusher, errors


def hold(flusher: LogFlusher) -> threading.Event:
    """Keep the worker busy until the returned event is set: later jobs wait in the queue."""
    gate, running = threading.Event(), threading.Event()

    def job() -> None:
        running.set()
        gate.wait(10)

    flusher.submit(job)
    running.wait(10)
    return gate


def test_the_recovery_point_moves_only_after_the_rolls_flush_ran(tmp_path: Path) -> None:
    m, flusher, errors = manager(tmp_path)
    log = m.create_log("t", 0)
    gate = hold(flusher)
    for _ in range(3):  # each batch fills a segment: two rolls
        log.append_as_leader(batch(), 0)
    assert [s.base_offset for s in log.segments] == [0, 1, 2]
    assert log.recovery_point == 0  # the old segments are not known to be on disk yet
    assert not (tmp_path / "t-0" / "00000000000000000002.snapshot").exists()
    gate.set()
    flusher.drain()
    assert log.recovery_point == 2  # the active segment's base, as Kafka after a roll
    assert (tmp_path / "t-0" / "00000000000000000002.snapshot").exists()
    log.flush_in_background()  # log.flush.interval.ms: the active segment too
    flusher.drain()
    assert log.recovery_point == 3 and not errors
    m.shutdown()


def test_a_truncation_voids_the_flushes_and_snapshots_in_flight(tmp_path: Path) -> None:
    m, flusher, errors = manager(tmp_path)
    log = m.create_log("t", 0)
    gate = hold(flusher)
    for _ in range(3):
        log.append_as_leader(batch(), 0)  # flushes up to 1 and 2, snapshots at 1 and 2 queued
    assert log.truncate_to(1) and log.log_end_offset == 1
    log.append_as_leader(batch(), 1)  # offset 1 again, other data, not flushed
    gate.set()
    flusher.drain()
    assert log.recovery_point <= 1  # the queued flush up to 2 spoke of the truncated data
    assert log.producer_state.snapshot_offsets() == []  # no snapshot of the old offset 2 landed
    assert not errors
    m.shutdown()


def test_a_superseded_leader_epoch_checkpoint_is_not_written(tmp_path: Path, monkeypatch) -> None:
    m, flusher, errors = manager(tmp_path)
    log = m.create_log("t", 0)
    cache = log.leader_epoch_cache
    written: list[list[tuple[int, int]]] = []
    write = cache.checkpoint.write

    def recording_write(entries) -> None:  # observes the real write, which still happens
        written.append([tuple(e) for e in entries])
        write(entries)

    monkeypatch.setattr(cache.checkpoint, "write", recording_write)
    gate = hold(flusher)
    for epoch in range(3):
        log.append_as_leader(batch(), epoch)
    gate.set()
    flusher.drain()
    assert written == [[(0, 0), (1, 1), (2, 2)]]  # one write: the newest state
    assert cache.checkpoint.read() == cache.epoch_entries()
    assert not errors
    m.shutdown()


def test_a_deleted_logs_queued_jobs_are_dropped(tmp_path: Path) -> None:
    m, flusher, errors = manager(tmp_path)
    log = m.create_log("t", 0)
    gate = hold(flusher)
    for epoch in range(3):
        log.append_as_leader(batch(), epoch)
    assert m.delete_log("t", 0)
    gate.set()
    flusher.drain()
    assert not (tmp_path / "t-0").exists() and not errors
    m.shutdown()


def test_shutdown_waits_for_queued_flushes(tmp_path: Path) -> None:
    m, flusher, errors = manager(tmp_path)
    log = m.create_log("t", 0)
    gate = hold(flusher)
    for _ in range(3):
        log.append_as_leader(batch(), 0)
    threading.Timer(0.2, gate.set).start()
    m.shutdown()  # drains the queue (the gate opens meanwhile) before closing the logs
    assert gate.is_set()
    assert (tmp_path / "t-0" / "00000000000000000002.snapshot").exists()
    assert (tmp_path / ".kafka_cleanshutdown").exists() and not errors
    # The last flush ran in the worker, and the checkpoint written after it says so.
    recovery_points = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()
    assert recovery_points == {("t", 0): 3}
    assert (tmp_path / "t-0" / "00000000000000000003.snapshot").exists()


def test_after_a_failed_fsync_the_recovery_point_stays(tmp_path: Path, monkeypatch) -> None:
    import errno
    import os

    m, flusher, errors = manager(tmp_path)
    log = m.create_log("t", 0)
    log.append_as_leader(batch(), 0)
    # The new log's folder syncs and its first leader-epoch checkpoint ran on a working disk:
    # else they race the second append, the dir going offline before it.
    flusher.drain()
    fsync = os.fsync

    def failing_fsync(fd: int) -> None:  # the disk fails every fsync from now on
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    log.append_as_leader(batch(), 0)  # a roll: its flush fails in the worker
    flusher.drain()
    # An I/O error in the worker is Kafka's: KAFKA_STORAGE_ERROR, and the log dir goes offline.
    assert errors and all(isinstance(e, KafkaStorageError) and isinstance(e.__cause__, OSError)
                          for e in errors) and log.flush_failed
    assert m.failure_channel.is_offline(str(tmp_path))
    monkeypatch.setattr(os, "fsync", fsync)  # the disk works again, the lost fsync is not redone
    with pytest.raises(KafkaStorageError):  # nothing more is written to an offline dir
        log.append_as_leader(batch(), 0)
    flusher.drain()
    assert log.recovery_point == 0
    m.shutdown()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # the next start recovers


def test_jobs_run_in_order_and_drain_waits_only_for_those_before_it() -> None:
    """Jobs queue behind a running one and run in submission order; drain() returns once the
    jobs submitted before it ran, even while more keep coming; without on_error it raises the
    first job error."""
    flusher = LogFlusher()
    ran: list[int] = []
    gate = hold(flusher)
    for i in range(5):
        flusher.submit(lambda i=i: ran.append(i))
    flusher.submit(lambda: (_ for _ in ()).throw(ValueError("job failed")))
    drained = threading.Event()

    def drain() -> None:
        with pytest.raises(ValueError, match="job failed"):
            flusher.drain()
        drained.set()

    waiter = threading.Thread(target=drain)
    waiter.start()
    assert not drained.wait(0.05)  # the held job is still running
    release_later = threading.Event()
    flusher.submit(lambda: release_later.wait(10))  # after drain() began: not waited for
    gate.set()
    assert drained.wait(10)
    waiter.join()
    assert ran == [0, 1, 2, 3, 4]
    release_later.set()
    flusher.close()
