"""The audit on intact data, then on copies damaged one way per partition: every violation found,
at the right offset and replica, and nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.audit import run_audit
from protocol.records import RECORDS_OFFSET, assign_offsets, encode_batch, iter_batches
from protocol.transaction_records import ControlType, marker_batch
from storage.append_origin import AppendOrigin
from storage.checkpoint import OffsetCheckpointFile
from storage.log import Log
from storage.log_config import LogConfig
from storage.naming import CLEANER_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT


def _segments(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.log"))


def _batches(path: Path) -> list:
    return list(iter_batches(path.read_bytes()))


def test_audit_passes_on_produced_data(spark, produced, tmp_path, capsys):
    code = cli.main(["audit", "--data-dir", str(produced.data_dir), "--out", str(tmp_path),
                     "--master", "local[2]", "--no-progress"])  # fmt: skip
    report = json.loads((tmp_path / "audit.json").read_text())
    assert report["violations"] == [] and code == 0
    assert report["records"] == len(produced.records) and report["partitions"] == 4
    assert f"audit: 4 partitions, {len(produced.records)} records, 0 violations" in capsys.readouterr().out


def test_identical_replicas_pass(spark, produced, tmp_path, cluster_of):
    cluster_of(produced.data_dir, tmp_path, replicas=3)
    result = run_audit(spark, tmp_path)
    assert (result.replicas, result.partitions, result.violations) == (12, 4, [])
    assert result.records == 3 * len(produced.records)


@pytest.fixture(scope="module")
def damaged(produced, tmp_path_factory):
    """A two-broker copy of the produced data, damaged as follows; returns (dir, expected set)."""
    from tests.pipeline.conftest import make_cluster

    root = tmp_path_factory.mktemp("damaged")
    b0, b1 = make_cluster(produced.data_dir, root, replicas=2)
    expected: set[tuple] = set()

    # 1. broker 0, orders-0: one byte flipped inside a batch's records.
    segment = _segments(b0 / "orders-0")[0]
    pos, header = _batches(segment)[len(_batches(segment)) // 2]
    data = bytearray(segment.read_bytes())
    data[pos + RECORDS_OFFSET + 3] ^= 0xFF
    segment.write_bytes(bytes(data))
    expected |= {("orders", 0, 0, header.base_offset, "crc"),
                 ("orders", 0, 0, header.base_offset, "replica-divergence")}  # fmt: skip

    # 2. broker 1, orders-1: the last segment cut in the middle of a batch (below the HW).
    segment = _segments(b1 / "orders-1")[-1]
    batches = _batches(segment)
    cut = len(batches) // 2
    with open(segment, "r+b") as f:
        f.truncate(batches[cut][0] + 10)
    expected.add(("orders", 1, 1, batches[cut][1].base_offset, "missing-below-high-watermark"))
    expected |= {("orders", 1, 1, h.base_offset, "replica-divergence") for _, h in batches[cut:]}

    # 3. broker 1, orders-2: first segment deleted, log start checkpoint untouched -> a gap.
    first, second = _segments(b1 / "orders-2")[:2]
    lost = _batches(first)
    first.unlink()
    expected.add(("orders", 2, 1, 0, "offset-gap"))
    expected |= {("orders", 2, 1, h.base_offset, "replica-divergence") for _, h in lost}

    # 4. broker 1, events-0: first segment removed by "retention": the log start moved with it.
    checkpoint = OffsetCheckpointFile(b1 / LOG_START_OFFSET_CHECKPOINT)
    events = _segments(b1 / "events-0")
    assert len(events) >= 2
    events[0].unlink()
    starts = checkpoint.read()
    starts[("events", 0)] = int(events[1].stem)
    checkpoint.write(starts)

    # 5. broker 0, events-0: the idempotent producer's last batch appended again at new offsets.
    segment = _segments(b0 / "events-0")[-1]
    pos, header = _batches(segment)[-1]
    raw = segment.read_bytes()
    copy = bytearray(raw[pos : pos + header.size])
    assign_offsets(copy, 0, header.next_offset, header.partition_leader_epoch)  # outside the CRC
    segment.write_bytes(raw + bytes(copy))
    expected.add(("events", 0, 0, header.next_offset, "duplicate-sequence"))
    return root, expected


def test_damage_found_exactly(spark, damaged, tmp_path, capsys):
    root, expected = damaged
    code = cli.main(["audit", "--data-dir", str(root), "--out", str(tmp_path), "--no-progress"])
    report = json.loads((tmp_path / "audit.json").read_text())
    found = {(v["topic"], v["partition"], v["replica"], v["offset"], v["kind"])
             for v in report["violations"]}  # fmt: skip
    assert found == expected
    assert len(report["violations"]) == len(expected) == report["violation_count"]
    assert code == 1
    assert f"{len(expected)} violations" in capsys.readouterr().out.splitlines()[-1]


def test_crc_damage_is_visible_in_the_record_view(spark, damaged):
    root, expected = damaged
    (offset,) = [o for t, p, r, o, kind in expected if kind == "crc"]
    rows = (spark.read.format("kafka-sim-log").option("path", str(root)).load()
            .where("broker_id = 0 AND topic = 'orders' AND partition = 0 AND NOT crc_valid")
            .collect())  # fmt: skip
    assert rows and min(r.offset for r in rows) == offset


def test_transactions_are_audited(spark, tmp_path):
    """Committed, aborted and open transactions pass; a plain write inside an open transaction
    and a marker older than its data (both refused by a leader: written here as a damaged
    replica would hold them) are found at their offsets."""
    def data(pid: int, seq: int, epoch: int = 0, transactional: bool = True) -> bytes:
        return encode_batch([(b"k", b"v", [], None)], producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, is_transactional=transactional)

    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=test\nnode.id=0\n")
    log = Log.open(tmp_path / "txn-0", LogConfig(), now_ms=lambda: 1_700_000_000_000)
    marker = lambda pid, kind, epoch=0: log.append_as_leader(  # noqa: E731
        marker_batch(pid, epoch, kind, 0), 0, origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(data(1, 0), 0)  # 0
    marker(1, ControlType.COMMIT)  # 1
    log.append_as_leader(data(2, 0), 0)  # 2
    marker(2, ControlType.ABORT)  # 3
    log.append_as_leader(data(3, 0), 0)  # 4: still open at the end
    log.append_as_leader(data(4, 0, epoch=5), 0)  # 5
    leo = log.log_end_offset

    def damaged(batch: bytes, offset: int) -> bytes:
        raw = bytearray(batch)
        assign_offsets(raw, 0, offset, 0)
        return bytes(raw)

    log.append_as_follower(damaged(data(1, 1, transactional=True), leo))  # 6: producer 1 opens
    log.append_as_follower(damaged(data(1, 2, transactional=False), leo + 1))  # 7: plain, inside
    log.append_as_follower(damaged(marker_batch(4, 4, ControlType.COMMIT, 0), leo + 2))  # 8
    log.close()
    found = {(v.offset, v.kind) for v in run_audit(spark, tmp_path).violations}
    assert found == {(7, "plain-write-in-transaction"), (8, "stale-transaction-marker")}


def test_gaps_in_a_compacted_log_are_no_violation_without_a_metadata_store(spark, produced, tmp_path,
                                                                           cluster_of):
    """A multi-process cluster's folders carry no topic configs (they live in ZooKeeper): a topic is
    known compacted from a cleaner checkpoint on any replica, the internal topics always. Gaps a
    follower copied from its cleaned leader, or that a broker killed before its checkpoint write
    kept, lie above the replica's own checkpoint and are still the cleaner's work."""
    b0, b1 = cluster_of(produced.data_dir, tmp_path, replicas=2)
    assert not (tmp_path / "metadata-store").exists()
    OffsetCheckpointFile(b0 / CLEANER_CHECKPOINT).write({("orders", 2): 0})
    first = _segments(b1 / "orders-2")[0]
    lost = _batches(first)
    first.unlink()
    offsets = tmp_path / "broker-0" / "__consumer_offsets-0"
    shutil.copytree(b0 / "events-0", offsets)  # any batches: a gap in an internal topic
    segment = _segments(offsets)[0]
    raw = segment.read_bytes()
    (_, first_batch), (gap_at, _), (rest_at, _) = _batches(segment)[:3]
    segment.write_bytes(raw[:gap_at] + raw[rest_at:])
    assert _batches(segment)[1][1].base_offset > first_batch.next_offset
    result = run_audit(spark, tmp_path)
    found = {(v.topic, v.partition, v.replica, v.offset, v.kind) for v in result.violations}
    assert found == {("orders", 2, 1, h.base_offset, "replica-divergence") for _, h in lost}
