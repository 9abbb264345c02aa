"""The pipeline's discovery over a broker with several log dirs (`--data-dir a,b`, as log.dirs):
every dir's partition folders are found, each with its own dir's checkpoints; a future log being
moved in (`-future`) is not a replica."""

from __future__ import annotations

import time
from pathlib import Path

from pipeline.layout import find_brokers, find_replicas
from protocol.records import encode_batch
from storage.log_config import LogConfig
from storage.log_manager import LogManager


def test_a_broker_with_two_log_dirs_is_found_in_both(tmp_path: Path):
    a, b = tmp_path / "a" / "broker-3", tmp_path / "b" / "broker-3"
    manager = LogManager([a, b], LogConfig(), now_ms=lambda: int(time.time() * 1000))
    manager.load()
    for partition, count in ((0, 2), (1, 3)):  # partition 0 in a, 1 in b
        log = manager.create_log("t", partition)
        for i in range(count):
            log.append_as_leader(encode_batch([(b"k", b"v%d" % i, [], 1_000 + i)]), 0)
        log.high_watermark = log.log_end_offset
    manager.create_future_log("t", 0, str(b))  # a move of partition 0 into b, under way
    manager.shutdown()
    for d in (a, b):
        (d / "meta.properties").write_text("version=1\ncluster.id=c\nnode.id=3\n")

    for given in (f"{a},{b}", f"{tmp_path / 'a'},{tmp_path / 'b'}"):  # the dirs, or their parents
        assert [(x.replica, x.path) for x in find_brokers(given)] == [(3, a), (3, b)]
        replicas = {(r.replica, r.topic, r.partition): r for r in find_replicas(given)}
        assert sorted(replicas) == [(3, "t", 0), (3, "t", 1)]
        assert replicas[(3, "t", 0)].high_watermark == 2  # from a's checkpoint
        assert replicas[(3, "t", 1)].high_watermark == 3  # from b's
        assert Path(replicas[(3, "t", 0)].segments[0].path).parent == a / "t-0"
        assert Path(replicas[(3, "t", 1)].segments[0].path).parent == b / "t-1"
    assert [x.path for x in find_brokers(a)] == [a]  # one dir alone: only its partitions
