"""Broker benchmarks with confluent-kafka against a `kafka-sim run` subprocess on loopback.

Prints produce throughput (200k x 100 B and 20k x 10 KB, acks=1), consume throughput
(200k x 100 B) and end-to-end latency p50/p99 at 1k msg/s with the default fetch wait.
`--quick` divides the message counts by 10.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.cli", "run", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
         "--log-dirs", data_dir, "--brokers", "1", "-o", "log.level=warning",
         "-o", "control.listener="],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)  # the broker is another process: nothing to await but its port
    proc.kill()
    raise RuntimeError("broker did not start")


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)


def produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
    payload = os.urandom(size)
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


def e2e_latency(bootstrap: str, topic: str, count: int, rate: int) -> list[float]:
    from confluent_kafka import TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-e2e",
                         "enable.auto.commit": False, "auto.offset.reset": "latest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap = start_broker(data_dir)
        try:
            for topic, count, size in (("small", 200_000 // scale, 100),
                                       ("large", 20_000 // scale, 10_000)):
                create_topic(bootstrap, topic)
                elapsed = produce(bootstrap, topic, count, size)
                print(f"produce {count} x {size} B acks=1: {count / elapsed:,.0f} msg/s, "
                      f"{count * size / elapsed / 1e6:,.1f} MB/s")
            elapsed = consume(bootstrap, "small", 200_000 // scale)
            print(f"consume {200_000 // scale} x 100 B: {200_000 // scale / elapsed:,.0f} msg/s")
            create_topic(bootstrap, "e2e")
            lat = sorted(e2e_latency(bootstrap, "e2e", 3_000 // scale, 1_000))
            if lat:
                p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
                print(f"e2e latency at 1k msg/s ({len(lat)} msgs): p50 "
                      f"{statistics.median(lat) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
