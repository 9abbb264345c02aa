"""Transactional vs idempotent produce: confluent-kafka against a one-broker `kafka-sim run`
subprocess, 100 B records over 4 partitions, 1000 records per transaction, acks=all; throughput of
both in the same run and the commit latency (commit_transaction's round trip) p50/p99.
`--quick` divides the record counts by 10.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without install

from bench_broker import create_topic, start_broker  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

PARTITIONS = 4
PER_TRANSACTION = 1000
SIZE = 100


def producer(bootstrap: str, extra: dict) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                     "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000,
                     **extra})


def send(p: Producer, topic: str, count: int, failed: list) -> None:
    payload = b"x" * SIZE
    for i in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=i % PARTITIONS,
                          on_delivery=lambda e, _: e and failed.append(e))
                break
            except BufferError:
                p.poll(0.01)


def idempotent(bootstrap: str, topic: str, count: int) -> float:
    p, failed = producer(bootstrap, {}), []
    p.produce(topic, b"warm-up")
    p.flush(30)
    started = time.perf_counter()
    send(p, topic, count, failed)
    p.flush(300)
    assert not failed, failed[:3]
    return count / (time.perf_counter() - started)


def transactional(bootstrap: str, topic: str, count: int) -> tuple[float, list[float]]:
    p, failed = producer(bootstrap, {"transactional.id": f"bench-{topic}"}), []
    p.init_transactions(30)
    commits: list[float] = []
    started = time.perf_counter()
    for _ in range(count // PER_TRANSACTION):
        p.begin_transaction()
        send(p, topic, PER_TRANSACTION, failed)
        before = time.perf_counter()
        p.commit_transaction(60)  # flushes the transaction's records, then EndTxn
        commits.append(time.perf_counter() - before)
    rate = count / (time.perf_counter() - started)
    assert not failed, failed[:3]
    return rate, commits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    count = 200_000 // (10 if args.quick else 1)
    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap = start_broker(data_dir)
        try:
            create_topic(bootstrap, "bench-idem", partitions=PARTITIONS)
            create_topic(bootstrap, "bench-txn", partitions=PARTITIONS)
            idem_rate = idempotent(bootstrap, "bench-idem", count)
            txn_rate, commits = transactional(bootstrap, "bench-txn", count)
        finally:
            proc.terminate()
            proc.wait(30)
    commits_ms = sorted(c * 1000 for c in commits)
    p99 = commits_ms[min(len(commits_ms) - 1, int(len(commits_ms) * 0.99))]
    print(f"confluent-kafka {count} x {SIZE} B over {PARTITIONS} partitions, acks=all: "
          f"idempotent {idem_rate:,.0f} msg/s; transactional ({PER_TRANSACTION} per transaction) "
          f"{txn_rate:,.0f} msg/s ({txn_rate / idem_rate - 1:+.1%})")
    print(f"commit_transaction latency over {len(commits_ms)} commits: "
          f"p50 {statistics.median(commits_ms):.2f} ms, p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
