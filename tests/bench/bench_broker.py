"""Broker benchmarks with confluent-kafka against a `kafka-sim run` subprocess on loopback.

Single broker: produce throughput (200k x 100 B and 20k x 10 KB, acks=1), consume throughput
(200k x 100 B), end-to-end latency p50/p99 at 1k msg/s with the default fetch wait.
Three brokers, RF=3: acks=1 vs acks=-1 produce throughput (100 B and 10 KB), e2e latency with
acks=-1 — in one process (embedded) and as three processes over a real ZooKeeper.
`--quick` divides the message counts by 10.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the raw client lives in tests/


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: str, brokers: int = 1) -> tuple[subprocess.Popen, str]:
    port = free_port()
    while any(not port_free(port + i) for i in range(1, brokers)):
        port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.server.cli", "run", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
         "--log-dirs", data_dir, "--brokers", str(brokers), "-o", "log.level=warning",
         "-o", "control.listener="],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)  # the broker is another process: nothing to await but its port
    else:
        proc.kill()
        raise RuntimeError("broker did not start")
    bootstrap = f"127.0.0.1:{port}"
    if brokers > 1:  # the first serves once registered; the others may not be yet
        admin = AdminClient({"bootstrap.servers": bootstrap})
        while len(admin.list_topics(timeout=10).brokers) < brokers:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"{brokers} brokers did not register")
            time.sleep(0.05)
    return proc, bootstrap


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def create_topic(bootstrap: str, name: str, rf: int = 1, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(10)


def produce(bootstrap: str, topic: str, count: int, size: int, acks: int = 1) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
    payload = os.urandom(size)
    # Warm-up: connections made and every partition's leader known, so a short run measures
    # the data flowing, not the client's start (its first Metadata may find no leader yet).
    for partition in range(len(producer.list_topics(topic, timeout=10).topics[topic].partitions)):
        producer.produce(topic, b"warm-up", partition=partition)
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    while got < count:
        got += len(consumer.consume(10_000, timeout=5))
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def e2e_latency(bootstrap: str, topic: str, count: int, rate: int, acks: int = 1) -> list[float]:
    from confluent_kafka import TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-e2e",
                         "enable.auto.commit": False, "auto.offset.reset": "latest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    # Warm up: both clients connected and the consumer fetching, so start-up is not measured.
    producer.produce(topic, b"warm-up")
    producer.flush(10)
    while not any(m.error() is None for m in consumer.consume(1, timeout=1)):
        pass
    latencies = []
    interval = 1 / rate
    next_send = time.perf_counter()
    for _ in range(count):
        now = time.perf_counter()
        if now < next_send:
            time.sleep(next_send - now)  # pacing the load, not waiting for a result
        next_send += interval
        producer.produce(topic, str(time.perf_counter()).encode())
        producer.poll(0)
        for msg in consumer.consume(100, timeout=0):
            latencies.append(time.perf_counter() - float(msg.value()))
    deadline = time.perf_counter() + 5
    while len(latencies) < count and time.perf_counter() < deadline:
        for msg in consumer.consume(100, timeout=0.1):
            latencies.append(time.perf_counter() - float(msg.value()))
    producer.flush(10)
    consumer.close()
    return latencies


async def leader_port(bootstrap: str, topic: str) -> int:
    """The port of the leader of the topic's partition 0, asked of the first bootstrap broker."""
    from tests.integration.raw_client import RawClient
    from tests.integration.test_protocol_edges import METADATA

    probe = await RawClient.connect(int(bootstrap.split(",")[0].rsplit(":", 1)[1]))
    metadata = await probe.request(METADATA, 12, {"topics": [{"name": topic}]})
    await probe.close()
    leader = metadata.topics[0].partitions[0].leader_id
    return {b.node_id: b.port for b in metadata.brokers}[leader]


def raw_e2e_latency(bootstrap: str, topic: str, count: int, acks: int) -> list[float]:
    """The broker alone: our sans-I/O client produces one record per ms and long-polls a fetch,
    so client-library batching and fetch scheduling are out of the figure."""
    from protocol.records import decode_batch, encode_batch, iter_batches
    from tests.integration.raw_client import RawClient
    from tests.integration.test_protocol_edges import FETCH, PRODUCE, produce_body

    async def run() -> list[float]:
        port = await leader_port(bootstrap, topic)
        producer = await RawClient.connect(port)
        consumer = await RawClient.connect(port)
        latencies: list[float] = []
        offset = 0

        async def consume() -> None:
            nonlocal offset
            while len(latencies) < count:
                response = await consumer.request(FETCH, 12, {
                    "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]})
                records = response.responses[0].partitions[0].records
                now = time.perf_counter()
                for pos, _ in iter_batches(records):
                    for record in decode_batch(records, pos)[1]:
                        if record.offset >= offset:
                            latencies.append(now - float(record.value))
                            offset = record.offset + 1

        async def produce() -> None:
            for _ in range(count):
                batch = encode_batch([(None, str(time.perf_counter()).encode(), [], None)])
                await producer.send(PRODUCE, 9, produce_body({(topic, 0): batch}, acks=acks))
                await asyncio.sleep(0.001)

        async def drain() -> None:
            for _ in range(count):
                await producer.read_frame()

        consuming = asyncio.create_task(consume())
        await asyncio.gather(produce(), drain())
        try:
            await asyncio.wait_for(consuming, 60)
        except TimeoutError:  # report what arrived: the figure says how far behind it fell
            print(f"  (only {len(latencies)} of {count} records consumed within 60 s)")
        await producer.close()
        await consumer.close()
        return latencies

    return asyncio.run(run())


def report_latency(label: str, lat: list[float]) -> None:
    if lat:
        lat = sorted(lat)
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        print(f"{label} ({len(lat)} msgs): p50 {statistics.median(lat) * 1000:.2f} ms, "
              f"p99 {p99 * 1000:.2f} ms")


def single_broker(scale: int) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap = start_broker(data_dir)
        try:
            for topic, count, size in (("small", 200_000 // scale, 100),
                                       ("large", 20_000 // scale, 10_000)):
                create_topic(bootstrap, topic)
                elapsed = produce(bootstrap, topic, count, size)
                print(f"1 broker, produce {count} x {size} B acks=1: {count / elapsed:,.0f} msg/s, "
                      f"{count * size / elapsed / 1e6:,.1f} MB/s")
            elapsed = consume(bootstrap, "small", 200_000 // scale)
            print(f"1 broker, consume {200_000 // scale} x 100 B: "
                  f"{200_000 // scale / elapsed:,.0f} msg/s")
            create_topic(bootstrap, "e2e")
            report_latency("1 broker, e2e latency at 1k msg/s acks=1, confluent-kafka",
                           e2e_latency(bootstrap, "e2e", 3_000 // scale, 1_000))
            create_topic(bootstrap, "e2e-raw")
            report_latency("1 broker, e2e latency at 1k msg/s acks=1, broker only (raw client)",
                           raw_e2e_latency(bootstrap, "e2e-raw", 2_000 // scale, 1))
        finally:
            proc.terminate()
            proc.wait(30)


def replicated_bench(label: str, bootstrap: str, scale: int) -> None:
    # Latency first, on a quiet cluster: after the acks=1 runs the followers are still catching up
    # (over TCP that takes seconds), and the e2e figure would measure that backlog.
    create_topic(bootstrap, "rf3-e2e", rf=3)
    report_latency(f"{label}, e2e latency at 1k msg/s acks=-1, confluent-kafka",
                   e2e_latency(bootstrap, "rf3-e2e", 3_000 // scale, 1_000, acks=-1))
    create_topic(bootstrap, "rf3-e2e-raw", rf=3)
    report_latency(f"{label}, e2e latency at 1k msg/s acks=-1, broker only (raw)",
                   raw_e2e_latency(bootstrap, "rf3-e2e-raw", 2_000 // scale, -1))
    for count, size in ((100_000 // scale, 100), (10_000 // scale, 10_000)):
        for acks in (-1, 1):
            topic = f"rf3-{size}-{'all' if acks == -1 else acks}"
            create_topic(bootstrap, topic, rf=3)
            elapsed = produce(bootstrap, topic, count, size, acks)
            print(f"{label}, produce {count} x {size} B acks={acks}: "
                  f"{count / elapsed:,.0f} msg/s, {count * size / elapsed / 1e6:,.1f} MB/s")


def replicated(scale: int) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap = start_broker(data_dir, brokers=3)
        try:
            replicated_bench("3 brokers RF=3 (one process)", bootstrap, scale)
        finally:
            proc.terminate()
            proc.wait(30)


def multi_process(scale: int) -> None:
    """The same RF=3 figures with one broker per process and a real ZooKeeper (more than one
    core at work), beside the embedded cluster's."""
    from broker.server.zookeeper_runner import is_installed

    if not is_installed():
        print("3 broker processes: skipped, ZooKeeper is not installed (apt-get install zookeeper)")
        return
    with tempfile.TemporaryDirectory() as data_dir, \
            process_cluster(data_dir) as (_, bootstrap, _control):
        replicated_bench("3 broker processes RF=3 (ZooKeeper)", bootstrap, scale)


@contextlib.contextmanager
def process_cluster(data_dir: str) -> Iterator[tuple[list[subprocess.Popen], str, list[int]]]:
    """Three `kafka-sim run` processes over a real ZooKeeper: (processes, bootstrap, control
    ports)."""
    from broker.server.zookeeper_runner import ZooKeeperServer

    with ZooKeeperServer(Path(data_dir) / "zk") as zk:
        ports = [free_port() for _ in range(3)]
        control = [free_port() for _ in range(3)]
        procs = [subprocess.Popen(
            [sys.executable, "-m", "broker.server.cli", "run",
             "--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", f"{data_dir}/b{i}",
             "-o", f"zookeeper.connect={zk.connect_string}/bench", "-o", f"broker.id={i}",
             "-o", "log.level=warning", "-o", f"control.listener=127.0.0.1:{control[i]}",
             "-o", "controlled.shutdown.enable=false"], cwd=ROOT)
            for i, port in enumerate(ports)]
        bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            deadline = time.monotonic() + 60
            while True:  # other processes: poll them until they form a cluster, controls up
                try:
                    if len(admin.list_topics(timeout=5).brokers) == 3:
                        [request_counts(port) for port in control]
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the broker processes did not form a cluster")
                time.sleep(0.1)
            yield procs, bootstrap, control
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)


def request_counts(control_port: int) -> dict[str, int]:
    """kafka_network_requestmetrics_requests_total by request name, from a broker's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{control_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    counts: dict[str, int] = {}
    for match in re.finditer(
            r'^kafka_network_requestmetrics_requests_total\{[^}]*request="(\w+)"[^}]*\} (\S+)',
            text, re.M):
        counts[match[1]] = counts.get(match[1], 0) + int(float(match[2]))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    single_broker(scale)
    replicated(scale)
    multi_process(scale)


if __name__ == "__main__":
    main()
