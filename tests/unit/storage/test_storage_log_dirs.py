"""LogManager over several log dirs: where new logs go, a dir going offline, a future log swapped in
(its start offset following retention on the current log meanwhile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.records import encode_batch
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import KafkaStorageError, LogDirFailureChannel
from storage.log_manager import LogManager
from storage.naming import HIGH_WATERMARK_CHECKPOINT


def manager(tmp_path: Path, channel: LogDirFailureChannel | None = None,
            **config) -> tuple[LogManager, str, str, str]:
    dirs = [tmp_path / d for d in "abc"]
    m = LogManager(dirs, LogConfig(**config), now_ms=lambda: 1_000, failure_channel=channel)
    m.load()
    return m, *(str(d) for d in dirs)


def fill(log, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        log.append_as_leader(encode_batch([(b"k", b"v%d" % i, [], 1_000 + i)]), 0)
    log.high_watermark = log.log_end_offset


def test_new_logs_go_to_the_online_dir_holding_fewest(tmp_path):
    channel = LogDirFailureChannel()
    m, a, b, c = manager(tmp_path, channel)
    assert [m.create_log("t", p).log_dir for p in range(4)] == [a, b, c, a]
    m.create_future_log("t", 1, c)  # a future log counts for its dir too
    assert m.create_log("u", 0).log_dir == b
    channel.maybe_add_offline_log_dir(b, "test")
    assert sorted(m.handle_log_dir_failure(b)) == [("t", 1), ("u", 0)]
    assert m.get_future_log("t", 1) is None  # its current log is gone: so is the copy
    assert not list(Path(c).glob("t-1.*-future"))
    assert m.create_log("u", 1).log_dir == c  # a: 2 logs, c: 1, b offline
    channel.maybe_add_offline_log_dir(a, "test")
    channel.maybe_add_offline_log_dir(c, "test")
    with pytest.raises(KafkaStorageError):
        m.create_log("u", 2)


def test_a_swapped_in_future_log_keeps_the_current_start_and_data(tmp_path):
    m, a, b, _ = manager(tmp_path, segment_bytes=200)
    current = m.create_log("t", 0)
    assert current.log_dir == a
    fill(current, 20)
    future = m.create_future_log("t", 0, b)
    assert future.directory.name.startswith("t-0.") and future.directory.name.endswith("-future")
    while future.log_end_offset < current.log_end_offset:  # a read answers from one segment
        future.append_as_follower(current.read(future.log_end_offset, 1 << 20).records)
    assert future.log_end_offset == current.log_end_offset == 20
    future.high_watermark = 20  # the copier's: the current log's, up to what it copied
    m.checkpoint()  # a future log's offsets go to its own dir's files
    assert (Path(b) / HIGH_WATERMARK_CHECKPOINT).read_text().splitlines()[2:] == ["t 0 20"]
    current.increment_log_start_offset(12)  # DeleteRecords or retention on the current log
    swapped = m.replace_current_with_future("t", 0)
    assert swapped.log_dir == b and swapped.directory == Path(b) / "t-0"
    assert (swapped.log_start_offset, swapped.log_end_offset, swapped.high_watermark) == (12, 20, 20)
    assert not (Path(a) / "t-0").exists() and not list(Path(a).glob("t-0.*"))
    assert m.get_log("t", 0) is swapped and m.get_future_log("t", 0) is None
    assert swapped.read(12, 1 << 20).records  # readable from its start
    fill(swapped, 1, 20)
    m.shutdown()
    again, *_ = manager(tmp_path, segment_bytes=200)
    reopened = again.get_log("t", 0)
    assert (reopened.log_dir, reopened.log_start_offset, reopened.log_end_offset) == (b, 12, 21)


def test_a_topic_of_249_characters_moves_between_dirs(tmp_path):
    """Its future folder's name would be 291 bytes (over the file systems' 255: ENAMETOOLONG,
    which took the whole destination dir offline): the name is cut, its partition folder's name
    kept in a file; a load finds the future log by it, and the swap names the folder in full.
    The old copy's `-delete` folder is cut too."""
    topic = "L" * 249
    channel = LogDirFailureChannel()
    m, a, b, _ = manager(tmp_path, channel, segment_bytes=200)
    current = m.create_log(topic, 0)
    assert current.log_dir == a
    fill(current, 5)
    future = m.create_future_log(topic, 0, b)
    name = future.directory.name
    assert len(name.encode()) <= 255 and "~" in name and name.endswith("-future")
    m.shutdown()
    m, *_ = manager(tmp_path, channel, segment_bytes=200)
    future = m.get_future_log(topic, 0)
    assert future is not None and future.log_dir == b and not m.load_problems
    current = m.get_log(topic, 0)
    while future.log_end_offset < current.log_end_offset:
        future.append_as_follower(current.read(future.log_end_offset, 1 << 20).records)
    swapped = m.replace_current_with_future(topic, 0)
    assert swapped.directory == Path(b) / f"{topic}-0"
    assert not (swapped.directory / "partition.name").exists()
    assert swapped.read(0, 1 << 20).records and swapped.log_end_offset == 5
    assert not list(Path(a).iterdir()) or all(p.is_file() for p in Path(a).iterdir())
    assert not channel.is_offline(a) and not channel.is_offline(b)


def test_a_folder_the_file_system_cannot_name_fails_only_its_log(tmp_path):
    """Under a log dir whose own path is long, a long topic's folder passes PATH_MAX
    (ENAMETOOLONG): creating its log, or its future log there, fails that log alone; the dir and
    its other logs stay online."""
    deep = tmp_path.joinpath(*["d" * 200] * 19)  # ~3,900 bytes: + a 250-byte folder > 4,095
    deep.mkdir(parents=True)
    channel = LogDirFailureChannel()
    m = LogManager([tmp_path / "a", deep], LogConfig(), now_ms=lambda: 1_000,
                   failure_channel=channel)
    m.load()
    a, b = str(tmp_path / "a"), str(deep)
    topic = "L" * 240
    current = m.create_log(topic, 0)
    assert current.log_dir == a
    fill(current, 3)
    kept = m.create_log("short", 0)
    assert kept.log_dir == b
    with pytest.raises(KafkaStorageError, match="File name too long"):
        m.create_future_log(topic, 0, b)
    m.preferred_log_dirs[(topic, 1)] = b
    with pytest.raises(KafkaStorageError, match="File name too long"):
        m.create_log(topic, 1)
    assert not channel.is_offline(b) and not channel.is_offline(a)
    assert m.get_future_log(topic, 0) is None and m.get_log(topic, 1) is None
    assert sorted(p.name for p in deep.iterdir() if p.is_dir()) == ["short-0"]
    fill(kept, 2)  # the dir's other log goes on
    assert kept.log_end_offset == 2 and current.log_end_offset == 3
    m.shutdown()
