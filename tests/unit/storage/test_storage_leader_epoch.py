"""Leader epoch cache: Kafka's assign/endOffsetFor/truncation rules, its checkpoint, and the Log wiring."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.records import encode_batch, iter_batches
from storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCheckpointFile,
    LeaderEpochFileCache,
)
from storage.log import Log
from storage.log_config import LogConfig

E = EpochEntry


def new_cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(tmp_path / LEADER_EPOCH_CHECKPOINT))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def stored(tmp_path: Path, name: str = LEADER_EPOCH_CHECKPOINT) -> list[EpochEntry] | None:
    return LeaderEpochCheckpointFile(tmp_path / name).read()


# -- assign ------------------------------------------------------------------------------------------


def test_empty_cache(tmp_path: Path) -> None:
    cache = new_cache(tmp_path)
    assert cache.latest_epoch == -1 and cache.latest_entry is None and cache.epoch_entries() == []
    assert cache.end_offset_for(0, 10) == (-1, -1)
    assert cache.end_offset_for(-1, 10) == (-1, -1)
    assert cache.epoch_for_offset(5) == -1


def test_assign_appends_newer_epochs_and_ignores_the_same_epoch_later(tmp_path: Path) -> None:
    cache = new_cache(tmp_path)
    assert cache.assign(2, 6)
    assert not cache.assign(2, 7)  # the epoch goes on: no new entry
    assert cache.assign(3, 8)
    assert cache.epoch_entries() == [E(2, 6), E(3, 8)] and cache.latest_epoch == 3
    for epoch, start in cache.epoch_entries():  # entries unpack like pairs
        assert (epoch, start) in ((2, 6), (3, 8))


def test_assign_same_epoch_at_a_lower_offset_moves_its_start(tmp_path: Path) -> None:
    cache = new_cache(tmp_path, (2, 6), (3, 9))
    assert cache.assign(3, 8)
    assert cache.epoch_entries() == [E(2, 6), E(3, 8)]


def test_assign_newer_epoch_below_existing_starts_drops_them(tmp_path: Path) -> None:
    cache = new_cache(tmp_path, (1, 0), (2, 10), (3, 20))
    assert cache.assign(4, 10)  # (2, 10) and (3, 20) cannot start at/after where 4 starts
    assert cache.epoch_entries() == [E(1, 0), E(4, 10)]


def test_assign_older_epoch_drops_the_newer_ones(tmp_path: Path) -> None:
    # Kafka's rule: the cache follows the log, so an older epoch appended at the end replaces
    # every entry it would otherwise contradict.
    cache = new_cache(tmp_path, (1, 0), (3, 10), (5, 20))
    assert cache.assign(4, 30)
    assert cache.epoch_entries() == [E(1, 0), E(3, 10), E(4, 30)]


def test_assign_rejects_negative_values(tmp_path: Path) -> None:
    cache = new_cache(tmp_path)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)
    assert cache.epoch_entries() == []


# -- end_offset_for (Kafka's endOffsetFor) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (-1, (-1, -1)),  # UNDEFINED
        (0, (0, 5)),  # below every epoch: it ends where the first known epoch starts
        (1, (1, 5)),
        (2, (2, 10)),  # an older epoch ends where the next one starts
        (3, (2, 10)),  # a gap: the largest epoch below, and the next higher one's start
        (4, (4, 15)),
        (5, (4, 15)),
        (6, (6, 42)),  # the latest epoch is still open: it ends at the log end offset
        (7, (-1, -1)),  # above every epoch
    ],
)
def test_end_offset_for(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    cache = new_cache(tmp_path, (2, 5), (4, 10), (6, 15))
    assert cache.end_offset_for(requested, 42) == expected


def test_end_offset_for_kafka_example(tmp_path: Path) -> None:
    # LeaderEpochFileCacheTest: epochs 0@10, 2@13, 4@17, log end offset 20.
    cache = new_cache(tmp_path, (0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(0, 20) == (0, 13)
    assert cache.end_offset_for(1, 20) == (0, 13)
    assert cache.end_offset_for(2, 20) == (2, 17)
    assert cache.end_offset_for(3, 20) == (2, 17)
    assert cache.end_offset_for(4, 20) == (4, 20)
    assert cache.end_offset_for(5, 20) == (-1, -1)


def test_epoch_for_offset(tmp_path: Path) -> None:
    cache = new_cache(tmp_path, (1, 5), (3, 10))
    assert [cache.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 99)] == [-1, -1, 1, 1, 3, 3]


# -- truncation --------------------------------------------------------------------------------------


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = new_cache(tmp_path, (1, 0), (2, 10), (3, 20))
    assert not cache.truncate_from_end(25)  # inside the latest epoch: nothing starts after it
    assert not cache.truncate_from_end(21)
    assert cache.truncate_from_end(20)  # an epoch starting exactly there goes
    assert cache.epoch_entries() == [E(1, 0), E(2, 10)]
    assert cache.truncate_from_end(5)
    assert cache.epoch_entries() == [E(1, 0)]
    assert cache.truncate_from_end(0) and cache.epoch_entries() == []
    assert not cache.truncate_from_end(0)


def test_truncate_from_start(tmp_path: Path) -> None:
    cache = new_cache(tmp_path, (1, 0), (2, 10), (3, 20))
    assert not cache.truncate_from_start(0)
    assert cache.truncate_from_start(5)  # epoch 1 covers 5: it now starts there
    assert cache.epoch_entries() == [E(1, 5), E(2, 10), E(3, 20)]
    assert cache.truncate_from_start(10)  # exactly at epoch 2: epoch 1 goes
    assert cache.epoch_entries() == [E(2, 10), E(3, 20)]
    assert not cache.truncate_from_start(10)
    assert cache.truncate_from_start(25)
    assert cache.epoch_entries() == [E(3, 25)]  # the latest epoch is kept, clamped
    assert cache.end_offset_for(3, 30) == (3, 30)


def test_clear(tmp_path: Path) -> None:
    cache = new_cache(tmp_path, (1, 0), (2, 10))
    cache.clear()
    assert cache.epoch_entries() == [] and stored(tmp_path) == []


# -- the checkpoint file -----------------------------------------------------------------------------


def test_every_change_is_persisted_in_kafkas_format(tmp_path: Path) -> None:
    cache = new_cache(tmp_path)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    assert not path.exists()
    cache.assign(0, 0)
    cache.assign(3, 120)
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    cache.assign(3, 150)  # no change, no write needed; contents the same
    assert stored(tmp_path) == [E(0, 0), E(3, 120)]
    cache.truncate_from_end(120)
    assert path.read_text() == "0\n1\n0 0\n"
    cache.truncate_from_start(7)
    assert stored(tmp_path) == [E(0, 7)]
    assert not list(tmp_path.glob("*.tmp"))


def test_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = new_cache(tmp_path, (1, 0))

    def crash(*_args: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr("storage.checkpoint.os.replace", crash)
    with pytest.raises(OSError):
        cache.assign(2, 10)
    assert stored(tmp_path) == [E(1, 0)]  # the old file is intact


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1\n0\n",
        "0\nx\n",
        "0\n2\n1 0\n",
        "0\n1\n1\n",
        "0\n1\n1 zero\n",
        "0\n2\n2 5\n1 9\n",  # epochs must increase
        "0\n2\n1 5\n2 5\n",  # start offsets must increase
        "0\n1\n-1 0\n",
    ],
)
def test_malformed_checkpoint(tmp_path: Path, text: str) -> None:
    (tmp_path / "cp").write_text(text)
    with pytest.raises(KafkaError) as info:
        LeaderEpochCheckpointFile(tmp_path / "cp").read()
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_missing_checkpoint_reads_none(tmp_path: Path) -> None:
    assert stored(tmp_path) is None
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("0\n0\n")
    assert stored(tmp_path) == []


# -- wiring into Log ---------------------------------------------------------------------------------


def batch(n: int = 1, *, base_offset: int = 0, epoch: int = -1) -> bytes:
    return encode_batch(
        [(None, b"v" * 20, [], 1_000 + i) for i in range(n)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def open_log(tmp_path: Path, **config) -> Log:
    return Log.open(tmp_path / "t-0", LogConfig(**config), now_ms=lambda: 2_000)


def leader_log(tmp_path: Path, **config) -> Log:
    """Offsets 0-3 in epoch 0, 4-9 in epoch 2, 10-11 in epoch 5 (batches of two)."""
    log = open_log(tmp_path, **config)
    for epoch in (0, 0, 2, 2, 2, 5):
        log.append_as_leader(batch(2), epoch)
    return log


def test_leader_appends_assign_new_epochs(tmp_path: Path) -> None:
    log = leader_log(tmp_path)
    cache = log.leader_epoch_cache
    assert cache.epoch_entries() == [E(0, 0), E(2, 4), E(5, 10)]
    assert stored(tmp_path / "t-0") == [E(0, 0), E(2, 4), E(5, 10)]
    assert log.end_offset_for_epoch(5) == (5, 12)
    assert log.end_offset_for_epoch(2) == (2, 10)
    assert log.end_offset_for_epoch(1) == (0, 4)
    assert log.end_offset_for_epoch(6) == (-1, -1)
    log.append_as_leader(batch(1), 3)  # a stale leader epoch never rewrites the cache
    assert cache.latest_epoch == 5


def test_rejected_append_assigns_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=100)
    with pytest.raises(KafkaError):
        log.append_as_leader(batch(10), 1)
    assert log.leader_epoch_cache.epoch_entries() == []


def test_follower_append_assigns_each_batch_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = (
        batch(2, base_offset=0, epoch=1)
        + batch(3, base_offset=2, epoch=1)
        + batch(1, base_offset=5, epoch=3)
        + batch(2, base_offset=6, epoch=4)
    )
    log.append_as_follower(data + batch(1, base_offset=8, epoch=6)[:30])  # torn tail ignored
    assert log.leader_epoch_cache.epoch_entries() == [E(1, 0), E(3, 5), E(4, 6)]
    log.append_as_follower(batch(1, base_offset=8, epoch=4) + batch(2, base_offset=9, epoch=7))
    assert log.leader_epoch_cache.epoch_entries() == [E(1, 0), E(3, 5), E(4, 6), E(7, 9)]
    assert log.end_offset_for_epoch(5) == (4, 9)
    headers = [h for _, h in iter_batches(log.read(0, 1 << 20).records)]
    assert [h.partition_leader_epoch for h in headers] == [1, 1, 3, 4, 4, 7]


def test_follower_batches_without_epoch_are_skipped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_follower(batch(2, base_offset=0) + batch(1, base_offset=2, epoch=0))
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 2)]


def test_truncate_to_cuts_the_cache_at_the_new_log_end(tmp_path: Path) -> None:
    log = leader_log(tmp_path)
    assert log.truncate_to(11)  # the batch 10-11 goes whole: the LEO becomes 10
    assert log.log_end_offset == 10
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 4)]
    assert log.end_offset_for_epoch(2) == (2, 10)
    assert log.truncate_to(7)  # the LEO becomes 6: epoch 2 keeps its start
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 4)]
    assert log.truncate_to(5)  # the LEO becomes 4: nothing of epoch 2 is left
    assert log.log_end_offset == 4
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 0)]
    log.append_as_leader(batch(1), 6)
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 0), E(6, 4)]
    assert stored(tmp_path / "t-0") == [E(0, 0), E(6, 4)]


def test_truncate_fully_clears_the_cache(tmp_path: Path) -> None:
    log = leader_log(tmp_path)
    log.truncate_fully_and_start_at(100)
    assert log.leader_epoch_cache.epoch_entries() == [] and stored(tmp_path / "t-0") == []
    log.append_as_follower(batch(1, base_offset=100, epoch=9))
    assert log.leader_epoch_cache.epoch_entries() == [E(9, 100)]


def test_retention_truncates_the_cache_from_the_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, retention_bytes=400)  # three batches a segment
    for epoch in (0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2):
        log.append_as_leader(batch(1), epoch)
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 0), E(1, 3), E(2, 7)]
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments() == 2 and log.log_start_offset == 6
    # Epoch 0 is gone; epoch 1 (offsets 3-6) now starts at the new log start offset.
    assert log.leader_epoch_cache.epoch_entries() == [E(1, 6), E(2, 7)]
    assert stored(tmp_path / "t-0") == [E(1, 6), E(2, 7)]
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(1) == (1, 7)


def test_reopen_reads_the_checkpoint(tmp_path: Path) -> None:
    log = leader_log(tmp_path)
    log.close()
    for clean in (True, False):
        log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=lambda: 2_000, clean_shutdown=clean)
        assert log.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 4), E(5, 10)]
        log.close()


@pytest.mark.parametrize(
    "damage",
    [
        "missing",
        "garbage",
        "stale",  # written before the last epoch started: the tail does not match
        "wrong",  # the latest epoch starts after the last batch
    ],
)
def test_reopen_rebuilds_a_missing_or_inconsistent_checkpoint(tmp_path: Path, damage: str) -> None:
    log = leader_log(tmp_path, segment_bytes=200)  # several segments
    assert len(log.segments) > 2
    log.close()
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_text("0\n7\nnot a checkpoint\n")
    elif damage == "stale":
        path.write_text("0\n2\n0 0\n2 4\n")
    else:
        path.write_text("0\n3\n0 0\n2 4\n5 11\n")
    log = open_log(tmp_path, segment_bytes=200)
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 4), E(5, 10)]
    assert stored(tmp_path / "t-0") == [E(0, 0), E(2, 4), E(5, 10)]


def test_reopen_drops_entries_past_the_log_end(tmp_path: Path) -> None:
    # A crash between writing the checkpoint and the batch leaves an entry at/after the LEO.
    log = leader_log(tmp_path)
    log.leader_epoch_cache.assign(7, 12)
    log.close()
    log = open_log(tmp_path)
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 4), E(5, 10)]


def test_reopen_after_a_torn_tail_matches_what_recovery_kept(tmp_path: Path) -> None:
    log = leader_log(tmp_path)
    log.close()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - 5)  # tears the only epoch-5 batch
    log = open_log(tmp_path)
    assert log.log_end_offset == 10
    assert log.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 4)]
    assert log.end_offset_for_epoch(2) == (2, 10)


def test_new_empty_log_writes_no_checkpoint(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.leader_epoch_cache.epoch_entries() == []
    assert not (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).exists()


def test_rebuild_respects_the_log_start_offset(tmp_path: Path) -> None:
    log = leader_log(tmp_path, segment_bytes=200)  # segments of one batch: 0, 2, 4, ...
    assert [s.base_offset for s in log.segments][:4] == [0, 2, 4, 6]
    log.close()
    (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).unlink()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=200), now_ms=lambda: 2_000,
                   log_start_offset=6)  # fmt: skip
    assert log.leader_epoch_cache.epoch_entries() == [E(2, 6), E(5, 10)]
