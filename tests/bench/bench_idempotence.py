"""Idempotent vs plain produce throughput: confluent-kafka against a one-broker `kafka-sim run`
subprocess (acks=all for both, 100 B and 10 KB), plus the broker-side cost alone: Log appends of
idempotent vs plain batches in-process. `--quick` divides the message counts by 10.

The plain client is also run with max.in.flight=5 (what idempotence imposes on librdkafka), to tell
the client's pipelining limit from the broker's sequence checks.
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

from protocol.records import encode_batch  # noqa: E402
from storage.log import Log  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402

REPEATS = 5  # interleaved runs per variant; the best one is compared (least disturbed by load)
CLIENTS = {
    "plain": {},
    "plain, max.in.flight=5": {"max.in.flight.requests.per.connection": 5},
    "idempotent": {"enable.idempotence": True},
}


def produce(bootstrap: str, topic: str, count: int, size: int, extra: dict) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         **extra})
    payload = b"x" * size
    failed: list = []
    # Warm up: connections, metadata and (idempotent) the producer id, which librdkafka fetches
    # on a timer after start-up (~0.5 s): a fixed cost, not throughput.
    producer.produce(topic, payload)
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=lambda e, _: e and failed.append(e))
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    elapsed = time.perf_counter() - started
    assert not failed, failed[:3]
    return elapsed


def over_the_wire(scale: int) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap = start_broker(data_dir)
        try:
            for count, size in ((200_000 // scale, 100), (20_000 // scale, 10_000)):
                rates: dict[str, list[float]] = {name: [] for name in CLIENTS}
                for run in range(REPEATS):  # interleaved, so drift hits every variant alike
                    for variant, (name, extra) in enumerate(CLIENTS.items()):
                        topic = f"bench-{size}-{variant}-{run}"
                        create_topic(bootstrap, topic)
                        rates[name].append(count / produce(bootstrap, topic, count, size, extra))
                base = max(rates["plain"])
                for name, values in rates.items():
                    rate = max(values)
                    print(f"confluent-kafka acks=all {count} x {size} B, {name}: best {rate:,.0f} "
                          f"msg/s, {rate * size / 1e6:,.1f} MB/s ({rate / base - 1:+.1%} vs plain); "
                          f"median {statistics.median(values):,.0f} msg/s")
        finally:
            proc.terminate()
            proc.wait(30)


def in_process(scale: int) -> None:
    """Log.append_as_leader only: 20k batches of 10 x 100 B, with and without a producer id."""
    batches = 20_000 // scale
    for label, idem in (("plain", False), ("idempotent", True)):
        best = float("inf")
        for _ in range(REPEATS):
            with tempfile.TemporaryDirectory() as tmp:
                log = Log.open(Path(tmp) / "t-0", LogConfig(), now_ms=lambda: 1_700_000_000_000)
                payloads = [encode_batch([(None, b"x" * 100, [], 1_700_000_000_000)] * 10,
                                         producer_id=7 if idem else -1,
                                         producer_epoch=0 if idem else -1,
                                         base_sequence=i * 10 if idem else -1)
                            for i in range(batches)]
                started = time.perf_counter()
                for payload in payloads:
                    log.append_as_leader(payload, 0)
                best = min(best, time.perf_counter() - started)
                log.close()
        print(f"Log.append_as_leader {batches} batches of 10 x 100 B, {label}: "
              f"{best / batches * 1e6:.1f} us/batch")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    in_process(scale)
    over_the_wire(scale)


if __name__ == "__main__":
    main()
