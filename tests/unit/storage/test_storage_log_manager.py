"""LogManager: loading folders, checkpoints, clean and unclean restarts, retention, deletion."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from protocol.records import encode_batch
from storage.checkpoint import GROUP_SYNC_MIN, OffsetCheckpointFile
from storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT
from storage.log_config import LogConfig
from storage.log_manager import LogManager
from storage.partition_metadata import read_partition_metadata


def now() -> int:
    return 1_000_000


def batch(n: int = 1) -> bytes:
    return encode_batch([(None, b"x" * 100, [], 900_000 + i) for i in range(n)])


def manager(path: Path, **config) -> LogManager:
    m = LogManager(path, LogConfig(**config), now_ms=now)
    m.load()
    return m


def test_create_append_shutdown_and_reload(tmp_path: Path) -> None:
    m = manager(tmp_path)
    a = m.create_log("orders", 0)
    b = m.create_log("my-topic", 2, LogConfig(segment_bytes=1024))
    assert m.create_log("orders", 0) is a and m.get_log("nope", 0) is None
    for _ in range(10):
        a.append_as_leader(batch(2), 0)
        b.append_as_leader(batch(), 0)
    a.high_watermark = 15
    b.high_watermark = 10
    assert set(m.all_logs()) == {("orders", 0), ("my-topic", 2)}
    m.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {
        ("orders", 0): 20, ("my-topic", 2): 10,
    }  # fmt: skip
    assert OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").read() == {
        ("orders", 0): 15, ("my-topic", 2): 10,
    }  # fmt: skip

    m = manager(tmp_path)
    assert m.had_clean_shutdown and not (tmp_path / ".kafka_cleanshutdown").exists()
    a, b = m.get_log("orders", 0), m.get_log("my-topic", 2)
    assert a is not None and b is not None
    assert (a.log_end_offset, a.high_watermark, b.log_end_offset) == (20, 15, 10)
    assert len(b.segments) > 1  # rolled at 1024 bytes before the restart
    assert a.append_as_leader(batch(), 0).first_offset == 20


def test_a_new_log_is_made_in_a_new_folder_and_a_folder_found_in_its_place_is_loaded(
    tmp_path: Path,
) -> None:
    m = manager(tmp_path)
    fresh = m.create_log("new", 0)
    assert [p.name for p in fresh.directory.iterdir()] == ["00000000000000000000.log"]
    assert fresh.append_as_leader(batch(3), 0).last_offset == 2
    assert fresh.leader_epoch_cache.latest_epoch == 0
    # A folder with records that no log of this manager knows (made after its load): kept as is
    stray = LogManager(tmp_path / "other", LogConfig(), now_ms=now)
    stray.load()
    stray.create_log("found", 0).append_as_leader(batch(2), 0)
    stray.shutdown()
    (tmp_path / "other" / "found-0").rename(tmp_path / "found-0")
    found = m.create_log("found", 0)
    assert found.log_end_offset == 2 and found.append_as_leader(batch(), 0).first_offset == 2


@pytest.mark.parametrize("count", [2, GROUP_SYNC_MIN * 2])
def test_logs_made_together_get_their_files_in_one_go(tmp_path: Path, count: int) -> None:
    """create_logs_stepwise: each new log's partition.metadata and, for those this broker leads,
    its leader-epoch checkpoint (the epoch from offset 0) are written with the folders (a group
    commit from GROUP_SYNC_MIN files on), so becoming leader at that epoch writes nothing more."""
    m = manager(tmp_path)
    topic_id = uuid.uuid4()
    wanted = [("t", p, None, topic_id, 7 if p % 2 == 0 else None) for p in range(count)]
    for step in m.create_logs_stepwise(wanted):
        step()
    m.flusher.drain()
    for p in range(count):
        log = m.get_log("t", p)
        assert log is not None and read_partition_metadata(log.directory) == topic_id
        checkpoint = log.directory / LEADER_EPOCH_CHECKPOINT
        if p % 2:
            assert log.leader_epoch_cache.latest_entry is None and not checkpoint.exists()
        else:
            assert checkpoint.read_text() == "0\n1\n7 0\n"
            assert not log.leader_epoch_cache.assign(7, log.log_end_offset)  # already there
        assert not [f for f in log.directory.iterdir() if f.name.endswith(".tmp")]


def test_unclean_restart_recovers_from_the_recovery_point(tmp_path: Path) -> None:
    m = manager(tmp_path, segment_bytes=1024)
    log = m.create_log("t", 0)
    for _ in range(20):
        log.append_as_leader(batch(), 0)
    m.flush_all()
    m.checkpoint()
    assert log.recovery_point == 20
    log.append_as_leader(batch(), 0)  # not flushed, not checkpointed
    active = log.active_segment.path
    log.close()  # "crash": no marker; tear the last batch
    with open(active, "r+b") as f:
        f.truncate(active.stat().st_size - 5)
    m = manager(tmp_path, segment_bytes=1024)
    log = m.get_log("t", 0)
    assert log is not None and not m.had_clean_shutdown
    assert log.log_end_offset == 20 and log.recovery_point == 20


def test_retention_cleanup_and_log_start_checkpoint(tmp_path: Path) -> None:
    m = manager(tmp_path, segment_bytes=1024, retention_bytes=1024)
    log = m.create_log("t", 0)
    for _ in range(30):
        log.append_as_leader(batch(), 0)
    log.high_watermark = log.log_end_offset
    assert m.cleanup() > 0
    start = log.log_start_offset
    assert start > 0
    m.shutdown()
    assert OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint").read() == {
        ("t", 0): start
    }
    m = manager(tmp_path, segment_bytes=1024, retention_bytes=1024)
    assert m.get_log("t", 0).log_start_offset == start


def test_update_config_and_delete(tmp_path: Path) -> None:
    m = manager(tmp_path)
    log = m.create_log("t", 0)
    m.create_log("t", 1)
    m.update_config("t", LogConfig(segment_bytes=2000))
    assert log.config.segment_bytes == 2000 and m.config_for("t").segment_bytes == 2000
    assert m.delete_log("t", 0) and not m.delete_log("t", 0)
    assert not (tmp_path / "t-0").exists() and (tmp_path / "t-1").exists()
    (tmp_path / "not-a-log-dir.x").mkdir()
    m.shutdown()
    assert set(manager(tmp_path).all_logs()) == {("t", 1)}


def test_load_skips_checkpoint_rows_it_cannot_parse(tmp_path: Path) -> None:
    """A garbage row (here the two halves of a topic named "bad\\n") no longer stops the load: the
    other rows are used, the bad ones are reported."""
    m = manager(tmp_path)
    log = m.create_log("orders", 0)
    for _ in range(5):
        log.append_as_leader(batch(), 0)
    log.high_watermark = 4
    m.shutdown()
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
        path = tmp_path / name
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0], str(int(lines[1]) + 1), "bad", " 0 5", *lines[2:]])
                        + "\n")
    m = manager(tmp_path)
    assert m.get_log("orders", 0).high_watermark == 4
    assert m.get_log("orders", 0).log_end_offset == 5
    assert len(m.load_problems) >= 4
    assert any("'bad'" in p for p in m.load_problems)
