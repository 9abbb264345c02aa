"""Consumer-group benchmarks with confluent-kafka against a 3-broker `kafka-sim run` subprocess.

Rebalance latency: a producer writes ~500 msg/s over 4 partitions; one member consumes; a second
member is started; the time until both have received a record from their new assignment. Run
with librdkafka's default heartbeat (3 s: the first member only learns of the rebalance from a
heartbeat) and with a 100 ms heartbeat (closer to the coordinator's own cost).
OffsetCommit throughput: synchronous commits (one at a time, each waiting for RF=3) and
asynchronous ones (pipelined on the coordinator connection). `--quick` shortens everything.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.bench.bench_broker import free_port, port_free  # noqa: E402

GROUP_OPTIONS = ["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=5",
                 "log.level=warning", "control.listener="]


def start_cluster(data_dir: str):
    import socket
    import subprocess

    port = free_port()
    while any(not port_free(port + i) for i in range(1, 3)):
        port = free_port()
    args = [sys.executable, "-m", "broker.server.cli", "run", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
            "--log-dirs", data_dir, "--brokers", "3"]
    for option in GROUP_OPTIONS:
        args += ["-o", option]
    proc = subprocess.Popen(args, cwd=Path(__file__).resolve().parents[2])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port + 2), timeout=0.2).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)  # another process: nothing to await but its port
    proc.kill()
    raise RuntimeError("cluster did not start")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)


class Member:
    """A consumer in a thread that notes when it first gets a record after each assignment."""

    def __init__(self, bootstrap: str, group: str, topic: str, heartbeat_ms: int) -> None:
        self.assigned_at: float | None = None
        self.first_record_at: float | None = None
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "latest", "enable.auto.commit": False,
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": heartbeat_ms})
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer, partitions) -> None:
        self.assigned_at, self.first_record_at = time.perf_counter(), None

    def _run(self) -> None:
        while not self.stopped:
            for message in self.consumer.consume(100, timeout=0.05):
                if message.error() is None and self.assigned_at and self.first_record_at is None:
                    self.first_record_at = time.perf_counter()

    def close(self) -> None:
        self.stopped = True
        self.thread.join()
        self.consumer.close()


def rebalance_latency(bootstrap: str, rounds: int, heartbeat_ms: int) -> list[float]:
    topic, group = f"rebalance-{heartbeat_ms}", f"bench-rebalance-{heartbeat_ms}"
    create_topic(bootstrap, topic, 4)
    stop = threading.Event()

    def load() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        while not stop.is_set():
            producer.produce(topic, b"x")
            producer.poll(0)
            time.sleep(0.002)  # ~500 msg/s: pacing the load, not waiting for a result
        producer.flush(10)

    threading.Thread(target=load, daemon=True).start()
    first = Member(bootstrap, group, topic, heartbeat_ms)
    latencies = []
    try:
        for _ in range(rounds):
            while first.first_record_at is None:  # settled with all partitions
                time.sleep(0.01)
            started = time.perf_counter()
            second = Member(bootstrap, group, topic, heartbeat_ms)
            while not (second.first_record_at and first.first_record_at
                       and first.assigned_at and first.assigned_at > started):
                time.sleep(0.005)
            latencies.append(max(second.first_record_at, first.first_record_at) - started)
            second.close()
            while not (first.assigned_at and first.assigned_at > latencies[-1] + started):
                time.sleep(0.01)
    finally:
        first.close()
        stop.set()
    return latencies


def commit_throughput(bootstrap: str, count: int) -> tuple[float, float]:
    topic = "commits"
    create_topic(bootstrap, topic, 1)
    done = [0]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-commits",
                         "enable.auto.commit": False,
                         "on_commit": lambda err, parts: done.__setitem__(0, done[0] + 1)})
    tp = TopicPartition(topic, 0)
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # find coordinator
    started = time.perf_counter()
    sync_count = max(count // 10, 50)
    for i in range(sync_count):
        tp.offset = i
        consumer.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=False)
    sync_rate = sync_count / (time.perf_counter() - started)
    done[0] = 0
    started = time.perf_counter()
    for i in range(count):
        consumer.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=True)
    while done[0] < count:
        consumer.poll(0.01)
    async_rate = count / (time.perf_counter() - started)
    consumer.close()
    return sync_rate, async_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, commits = (2, 2_000) if args.quick else (5, 10_000)
    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap = start_cluster(data_dir)
        try:
            for heartbeat_ms in (100, 3000):
                lat = rebalance_latency(bootstrap, rounds, heartbeat_ms)
                print(f"rebalance latency, heartbeat {heartbeat_ms} ms ({len(lat)} rounds): "
                      f"median {statistics.median(lat) * 1000:.0f} ms, "
                      f"max {max(lat) * 1000:.0f} ms")
            sync_rate, async_rate = commit_throughput(bootstrap, commits)
            print(f"OffsetCommit, RF=3 acks=-1: sync {sync_rate:,.0f} commits/s, "
                  f"async (pipelined) {async_rate:,.0f} commits/s")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
