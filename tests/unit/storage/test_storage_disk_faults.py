"""Disk faults in the log layer: partial writes leave no torn bytes the log does not know about,
I/O errors become KAFKA_STORAGE_ERROR and take the log dir offline, recovery cuts a torn tail."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.records import decode_batch, encode_batch, iter_batches
from storage.disk_faults import DiskFaults, FileKind
from storage.log import Log
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import KafkaStorageError, LogDirFailureChannel, OfflineLogDir
from storage.log_manager import LogManager
from storage.naming import CLEAN_SHUTDOWN_FILE


def batch(n: int = 3, size: int = 40) -> bytes:
    return encode_batch([(b"k%d" % i, b"v" * size, [], 1_000 + i) for i in range(n)])


def now() -> int:
    return 1_000_000


def open_log(root: Path, disk: DiskFaults, channel: LogDirFailureChannel, **config) -> Log:
    return Log.open(root / "topic-0", LogConfig(**{"index_interval_bytes": 1, **config}),
                    now_ms=now, disk=disk, failure_channel=channel)


def offsets(log: Log) -> list[int]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        got = [r.offset for pos, _ in iter_batches(data) for r in decode_batch(data, pos)[1]
               if r.offset >= offset]
        out += got
        offset = got[-1] + 1
    return out


def file_size(log: Log) -> int:
    return os.path.getsize(log.active_segment.path)


# -- DiskFaults itself --------------------------------------------------------------------------------

def test_a_partial_write_writes_the_allowed_part_for_real_then_fails(tmp_path: Path) -> None:
    disk = DiskFaults()
    fault = disk.add("write", "ENOSPC", after_bytes=10)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        assert disk.write(fd, memoryview(b"abcd")) == 4
        with pytest.raises(OSError) as info:
            disk.write(fd, memoryview(b"0123456789"))
        assert info.value.errno == errno.ENOSPC
        assert (tmp_path / "f").read_bytes() == b"abcd012345"
        with pytest.raises(OSError):  # a full disk stays full
            disk.write(fd, memoryview(b"x"))
        assert fault.hits == 2
        disk.truncate(fd, 4)  # shrinking a file on a full disk works
        assert (tmp_path / "f").read_bytes() == b"abcd"
        assert disk.clear() == 1
        assert disk.write(fd, memoryview(b"ef")) == 2
    finally:
        os.close(fd)


def test_eio_fails_truncation_too_and_fsync_faults_count_ops(tmp_path: Path) -> None:
    disk = DiskFaults()
    disk.add("write", "EIO")
    sync = disk.add("fsync", errno.EIO, after_ops=1)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        with pytest.raises(OSError):
            disk.write(fd, memoryview(b"abc"))
        assert (tmp_path / "f").read_bytes() == b""  # armed without a delay: nothing written
        with pytest.raises(OSError) as info:
            disk.truncate(fd, 0)
        assert info.value.errno == errno.EIO
        disk.fsync(fd)
        with pytest.raises(OSError):
            disk.fsync(fd)
        assert sync.hits == 1
    finally:
        os.close(fd)


@pytest.mark.parametrize("spec, message", [
    ({"operation": "read", "errno": "EIO"}, "operation must be write or fsync"),
    ({"operation": "write", "errno": "ENOPE"}, "errno must be a name"),
    ({"operation": "write", "errno": True}, "errno must be a name"),
    ({"operation": "fsync", "errno": "EIO", "after_bytes": 3}, "write faults only"),
    ({"operation": "write", "errno": "EIO", "after_bytes": -1}, "non-negative"),
    ({"operation": "write", "errno": "EIO", "after_ops": 1.5}, "non-negative"),
])
def test_bad_fault_specs_are_refused(spec: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DiskFaults().add(**spec)


# -- the log ----------------------------------------------------------------------------------------

def test_a_partial_write_leaves_no_torn_bytes_and_takes_the_dir_offline(tmp_path: Path) -> None:
    disk, channel, seen = DiskFaults(), LogDirFailureChannel(), []
    channel.add_listener(seen.append)
    log = open_log(tmp_path, disk, channel)
    for _ in range(3):
        log.append_as_leader(batch(), leader_epoch=0)
    size, leo = log.active_segment.size, log.log_end_offset
    entries = log.active_segment.offset_index.entries
    disk.add("write", "ENOSPC", after_bytes=len(batch()) // 2)

    with pytest.raises(KafkaStorageError) as info:
        log.append_as_leader(batch(), leader_epoch=0)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert file_size(log) == log.active_segment.size == size  # the torn half was cut off again
    assert log.log_end_offset == leo and log.active_segment.offset_index.entries == entries
    assert seen == [OfflineLogDir(str(tmp_path), seen[0].reason)]
    assert "appending to log topic-0" in seen[0].reason and "No space left" in seen[0].reason
    # An offline dir is neither written nor read again.
    for call in (lambda: log.append_as_leader(batch(), leader_epoch=0), lambda: log.read(0, 100),
                 log.flush, lambda: log.append_as_follower(batch())):
        with pytest.raises(KafkaStorageError):
            call()
    assert len(seen) == 1

    log.close_unflushed()
    reopened = open_log(tmp_path, DiskFaults(), LogDirFailureChannel())
    assert reopened.log_end_offset == leo
    reopened.append_as_leader(batch(), leader_epoch=0)
    assert offsets(reopened) == list(range(leo + 3))
    assert reopened.active_segment.offset_index.sane(reopened.active_segment.size)
    reopened.close()


def test_a_torn_tail_that_cannot_be_truncated_is_cut_by_recovery(tmp_path: Path) -> None:
    disk, channel = DiskFaults(), LogDirFailureChannel()
    log = open_log(tmp_path, disk, channel)
    log.append_as_leader(batch(), leader_epoch=0)
    log.append_as_leader(batch(), leader_epoch=0)
    size, leo = log.active_segment.size, log.log_end_offset
    disk.add("write", "EIO", after_bytes=25)

    with pytest.raises(KafkaStorageError):
        log.append_as_leader(batch(), leader_epoch=0)
    assert log.active_segment.size == size
    assert file_size(log) == size + 25  # EIO refused the truncation too: torn bytes on disk
    assert channel.is_offline(str(tmp_path))
    log.close_unflushed()

    reopened = open_log(tmp_path, DiskFaults(), LogDirFailureChannel())  # unclean: recovery runs
    assert file_size(reopened) == size and reopened.log_end_offset == leo
    reopened.append_as_leader(batch(), leader_epoch=0)
    assert offsets(reopened) == list(range(leo + 3))
    reopened.close()


def test_an_fsync_failure_takes_the_dir_offline(tmp_path: Path) -> None:
    disk, channel = DiskFaults(), LogDirFailureChannel()
    log = open_log(tmp_path, disk, channel)
    log.append_as_leader(batch(), leader_epoch=0)
    disk.add("fsync", "EIO")
    with pytest.raises(KafkaStorageError, match="flushing log topic-0"):
        log.flush()
    assert channel.is_offline(str(tmp_path))
    log.close_unflushed()


def test_the_log_manager_forgets_an_offline_dir_without_writing_to_it(tmp_path: Path) -> None:
    disk, channel, seen = DiskFaults(), LogDirFailureChannel(), []
    channel.add_listener(seen.append)
    manager = LogManager(tmp_path, LogConfig(), now_ms=now, disk=disk, failure_channel=channel)
    manager.load()
    for p in range(2):
        manager.create_log("t", p).append_as_leader(batch(), leader_epoch=0)
    manager.checkpoint()
    checkpoints = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    disk.add("write", "ENOSPC")
    with pytest.raises(KafkaStorageError):
        manager.get_log("t", 1).append_as_leader(batch(), leader_epoch=0)
    assert [d.path for d in seen] == [str(tmp_path)]

    assert sorted(manager.handle_log_dir_failure(str(tmp_path))) == [("t", 0), ("t", 1)]
    assert manager.all_logs() == {}
    with pytest.raises(KafkaStorageError):
        manager.create_log("t", 2)
    manager.checkpoint()
    manager.shutdown()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # the next start recovers
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == checkpoints

    again = LogManager(tmp_path, LogConfig(), now_ms=now)
    again.load()
    assert {k: log.log_end_offset for k, log in again.all_logs().items()} == {("t", 0): 3,
                                                                              ("t", 1): 3}
    again.shutdown()


def test_a_checkpoint_that_cannot_be_written_takes_the_dir_offline(tmp_path: Path) -> None:
    channel = LogDirFailureChannel()
    manager = LogManager(tmp_path, LogConfig(), now_ms=now, failure_channel=channel)
    manager.load()
    manager.create_log("t", 0).append_as_leader(batch(), leader_epoch=0)
    (tmp_path / "recovery-point-offset-checkpoint.tmp").mkdir()  # the temp file cannot be made
    with pytest.raises(KafkaStorageError, match="writing checkpoint files"):
        manager.checkpoint()
    assert channel.is_offline(str(tmp_path))


def test_a_flush_failing_at_shutdown_leaves_the_logs_for_recovery(tmp_path: Path) -> None:
    disk, channel = DiskFaults(), LogDirFailureChannel()
    manager = LogManager(tmp_path, LogConfig(), now_ms=now, disk=disk, failure_channel=channel)
    manager.load()
    manager.create_log("t", 0).append_as_leader(batch(), leader_epoch=0)
    disk.add("fsync", "EIO")
    manager.shutdown()  # no exception: the dir goes offline, nothing more is written
    assert channel.is_offline(str(tmp_path)) and manager.all_logs() == {}
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


# -- faults on index files, checkpoints and the cleaner's output (selected per kind) -----------------

def test_a_fault_hits_only_the_kinds_of_file_it_is_armed_for(tmp_path: Path) -> None:
    disk = DiskFaults()
    assert disk.add("write", "EIO").files == {FileKind.LOG}
    assert disk.add("fsync", "EIO", files=["all"]).files == set(FileKind)
    with pytest.raises(ValueError, match="file kind must be one of"):
        disk.add("write", "EIO", files=["segment"])
    disk.clear()
    disk.add("write", "ENOSPC", files=["index", "checkpoint"])
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        assert disk.write(fd, memoryview(b"ab")) == 2  # a segment write: not armed for it
        disk.write_all(fd, b"cd", FileKind.CLEANER)
        for kind in (FileKind.INDEX, FileKind.CHECKPOINT):
            with pytest.raises(OSError) as info:
                disk.write_all(fd, b"ef", kind)
            assert info.value.errno == errno.ENOSPC
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"abcd"


def manager_with(tmp_path: Path, disk: DiskFaults, **config) -> tuple[LogManager, LogDirFailureChannel]:
    channel = LogDirFailureChannel()
    manager = LogManager(tmp_path, LogConfig(**{"index_interval_bytes": 1, **config}),
                         now_ms=now, disk=disk, failure_channel=channel)
    manager.load()
    return manager, channel


def test_an_index_write_fault_takes_the_dir_offline_and_nothing_acknowledged_is_lost(
    tmp_path: Path,
) -> None:
    disk = DiskFaults()
    manager, channel = manager_with(tmp_path, disk, segment_bytes=400)
    log = manager.create_log("t", 0)
    acknowledged = []
    disk.add("write", "ENOSPC", files=["index"], after_bytes=40)  # a few entries, then a torn one
    with pytest.raises(KafkaStorageError, match="No space left on device"):
        for _ in range(20):  # each roll writes the old segment's index entries
            acknowledged.append(log.append_as_leader(batch(), leader_epoch=0).first_offset)
    assert channel.is_offline(str(tmp_path)) and len(log.segments) > 1
    with pytest.raises(KafkaStorageError, match="is offline"):
        log.append_as_leader(batch(), leader_epoch=0)
    assert disk.list()[0].hits == 1
    manager.handle_log_dir_failure(str(tmp_path))
    manager.shutdown()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    again, _ = manager_with(tmp_path, DiskFaults(), segment_bytes=400)  # the disk works again
    reopened = again.get_log("t", 0)
    assert reopened.log_end_offset == acknowledged[-1] + 3
    assert offsets(reopened) == list(range(reopened.log_end_offset))
    for segment in reopened.segments:  # every index well formed again (rebuilt where torn)
        assert segment.offset_index.well_formed() and segment.offset_index.sane(segment.size)
    again.shutdown()


def test_an_index_fsync_fault_in_the_flusher_takes_the_dir_offline(tmp_path: Path) -> None:
    disk = DiskFaults()
    manager, channel = manager_with(tmp_path, disk)
    log = manager.create_log("t", 0)
    log.append_as_leader(batch(), leader_epoch=0)
    disk.add("fsync", "EIO", files=["index"])
    with pytest.raises(KafkaStorageError, match="flushing log t-0"):
        log.flush_in_background()  # the segment file's fsync passes, its index's fails
    assert channel.is_offline(str(tmp_path)) and log.recovery_point == 0


def test_a_checkpoint_write_fault_keeps_the_old_file_and_takes_the_dir_offline(
    tmp_path: Path,
) -> None:
    disk = DiskFaults()
    manager, channel = manager_with(tmp_path, disk)
    manager.create_log("t", 0).append_as_leader(batch(), leader_epoch=0)
    manager.checkpoint()
    before = (tmp_path / "recovery-point-offset-checkpoint").read_bytes()
    manager.get_log("t", 0).append_as_leader(batch(), leader_epoch=0)
    manager.get_log("t", 0).flush()
    disk.add("write", "EIO", files=["checkpoint"], after_bytes=5)
    with pytest.raises(KafkaStorageError, match="writing checkpoint files"):
        manager.checkpoint()
    assert channel.is_offline(str(tmp_path))
    assert (tmp_path / "recovery-point-offset-checkpoint").read_bytes() == before  # never torn


def test_a_cleaner_output_fault_takes_the_dir_offline_and_leaves_the_log_as_it_was(
    tmp_path: Path,
) -> None:
    disk = DiskFaults()
    manager, channel = manager_with(tmp_path, disk, cleanup_policy="compact", segment_bytes=300)
    log = manager.create_log("t", 0)
    for i in range(20):
        log.append_as_leader(encode_batch([(b"k", b"v%d" % i, [], 1_000 + i)]), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    before = offsets(log)
    disk.add("write", "EIO", files=["cleaner"])
    assert manager.clean_logs(force=True) == 0
    assert channel.is_offline(str(tmp_path))
    assert manager.cleaner.uncleanable == {}  # Kafka's way: the dir, not the log, is at fault
    assert not list(log.directory.glob("*.cleaned")) and not list(log.directory.glob("*.swap"))
    with pytest.raises(KafkaStorageError, match="is offline"):
        log.append_as_leader(batch(), leader_epoch=0)
    manager.handle_log_dir_failure(str(tmp_path))
    manager.shutdown()

    again, _ = manager_with(tmp_path, DiskFaults(), cleanup_policy="compact", segment_bytes=300)
    assert offsets(again.get_log("t", 0)) == before
    again.shutdown()
