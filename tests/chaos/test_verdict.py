"""The chaos verdict itself can fail: a lost, moved or duplicated record and a replica whose bytes
differ below the high watermark are each reported (the chaos test passing means something)."""

from __future__ import annotations

from pathlib import Path

from protocol.records import encode_batch
from storage.checkpoint import OffsetCheckpointFile
from storage.naming import HIGH_WATERMARK_CHECKPOINT, log_dir_name, log_file
from tests.chaos.verdict import judge_read_back, replica_divergence, resent_under_a_new_epoch
from tests.chaos.workload import Ack, value_of


def test_read_back_reports_lost_misplaced_and_duplicated_records():
    acked = {value_of(n): Ack(0, n) for n in range(4)}
    log = {0: [(0, value_of(0)), (1, value_of(2)), (2, value_of(3)), (3, value_of(3)),
               (4, value_of(9))]}  # fmt: skip
    verdict = judge_read_back(acked, log)
    assert verdict.lost == [value_of(1)]
    assert verdict.misplaced == [(value_of(2), Ack(0, 2), (0, 1))]
    assert verdict.duplicated == [value_of(3)]
    assert verdict.unacknowledged == 1 and verdict.log_end == {0: 5}


def test_an_ack_without_offset_counts_where_the_record_is_in_its_partition():
    log = {0: [(0, value_of(0))], 1: [(0, value_of(1))]}
    verdict = judge_read_back({value_of(0): Ack(0, None), value_of(1): Ack(0, None)}, log)
    assert verdict.implicit_acks == 2 and verdict.lost == []
    assert verdict.misplaced == [(value_of(1), Ack(0, None), (1, 0))]  # another partition


def _replica(root: Path, broker: int, batches: list[bytes], hw: int) -> None:
    folder = root / f"broker-{broker}"
    (folder / log_dir_name("chaos", 0)).mkdir(parents=True)
    (folder / "meta.properties").write_text(f"broker.id={broker}\nversion=0\n")
    log_file(folder / log_dir_name("chaos", 0), 0).write_bytes(b"".join(batches))
    OffsetCheckpointFile(folder / HIGH_WATERMARK_CHECKPOINT).write({("chaos", 0): hw})


def test_replicas_that_differ_below_the_high_watermark_are_reported(tmp_path):
    batches = [encode_batch([(None, value_of(n), [], 1)], base_offset=n) for n in range(3)]
    other = encode_batch([(None, b"divergent", [], 1)], base_offset=1)
    for broker in (0, 1):
        _replica(tmp_path / "same", broker, batches, 3)
    _replica(tmp_path / "same", 2, batches, 3)
    assert replica_divergence(tmp_path / "same", "chaos") == []
    _replica(tmp_path / "diff", 0, batches, 3)
    _replica(tmp_path / "diff", 1, batches, 3)
    _replica(tmp_path / "diff", 2, [batches[0], other, batches[2]], 3)
    [problem] = replica_divergence(tmp_path / "diff", "chaos")
    assert "broker 2's copy differs" in problem and "batch 1" in problem
    _replica(tmp_path / "behind", 0, batches, 3)
    _replica(tmp_path / "behind", 1, batches, 3)
    _replica(tmp_path / "behind", 2, batches[:2], 2)
    [problem] = replica_divergence(tmp_path / "behind", "chaos")
    assert "high watermarks" in problem


def test_a_record_re_sent_under_a_bumped_epoch_is_told_from_one_written_twice(tmp_path):
    def batch(n: int, offset: int, epoch: int, seq: int) -> bytes:
        return encode_batch([(None, value_of(n), [], 1)], base_offset=offset, producer_id=7,
                            producer_epoch=epoch, base_sequence=seq)  # fmt: skip

    batches = [batch(0, 0, 0, 0), batch(1, 1, 0, 1), batch(1, 2, 1, 0), batch(2, 3, 1, 1),
               batch(2, 4, 1, 1)]  # fmt: skip
    for broker in (0, 1, 2):
        _replica(tmp_path, broker, batches, 5)
    # value 1: epoch 0, then re-sent as epoch 1 seq 0; value 2: twice in one epoch
    assert resent_under_a_new_epoch(tmp_path, "chaos", [value_of(1), value_of(2)]) == [value_of(1)]
