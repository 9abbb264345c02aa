"""Fetch cost against the partitions a fetch names, with and without a fetch session (KIP-227).

One embedded broker on this process's loop; a raw client fetches N partitions of which one gets a
record before each fetch. Sessionless, every fetch names and answers all N; in a session, after
the full fetch, each names only what moved and is answered the one that changed. Printed per N:
response bytes, the round trip after the produce (p50, p99) and the process CPU per fetch (the
broker runs on this loop: its CPU plus the raw client's encoding and decoding).
Then the same for followers: a 3-broker cluster, one topic of N partitions, and how many
partitions the followers' fetches named once idle. `--quick`: N = 1, 100; else 1, 100, 1000,
10000.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from broker.server.cluster import Cluster  # noqa: E402
from protocol import decode_response  # noqa: E402
from protocol.api import response_header_version  # noqa: E402
from protocol.headers import decode_response_header  # noqa: E402
from protocol.records import encode_batch  # noqa: E402
from tests.harness import cluster_config  # noqa: E402
from tests.integration.raw_client import RawClient  # noqa: E402
from tests.integration.test_protocol_edges import (  # noqa: E402
    CREATE_TOPICS,
    FETCH,
    PRODUCE,
    produce_body,
)

ROUNDS = 200


def fetch_body(topic: str, offsets: dict[int, int], session_id: int, epoch: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
                for p, o in offsets.items()]}] if offsets else [],
            "forgotten_topics_data": []}


async def create(client: RawClient, topic: str, partitions: int, rf: int = 1) -> None:
    response = await client.request(CREATE_TOPICS, 7, {"topics": [{
        "name": topic, "num_partitions": partitions, "replication_factor": rf, "configs": []}],
        "timeout_ms": 600_000})
    assert response.topics[0].error_code == 0, response


async def consumer_cost(partitions: int) -> None:
    with tempfile.TemporaryDirectory() as data:
        cluster = Cluster(cluster_config(Path(data)), 1)
        await cluster.start()
        broker = cluster.brokers[0]
        await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
        client = await RawClient.connect(broker.port)
        producer = await RawClient.connect(broker.port)
        topic = f"fs-{partitions}"
        await create(client, topic, partitions)
        for sessions in (False, True):
            offsets = dict.fromkeys(range(partitions), 0)
            session_id, epoch = 0, (0 if sessions else -1)
            rtts, sizes, cpu = [], [], []
            moved: set[int] = set()
            for round_ in range(ROUNDS + 1):
                p = round_ % partitions
                await producer.request(PRODUCE, 9, produce_body(
                    {(topic, p): encode_batch([(None, b"x" * 100, [], 1)])}))
                # In a session only partitions whose fetch offset moved are named.
                named = offsets if not sessions or epoch == 0 else {q: offsets[q] for q in moved}
                moved = set()
                body = fetch_body(topic, named, session_id, epoch)
                started, cpu_started = time.perf_counter(), time.process_time()
                correlation_id = await client.send(FETCH, 12, body)
                frame = await client.read_frame()
                rtts.append(time.perf_counter() - started)
                sizes.append(len(frame))
                got, at = decode_response_header(frame, response_header_version(FETCH, 12))
                assert got == correlation_id
                response = decode_response(FETCH, 12, frame, at)
                for t in response.responses:
                    for part in t.partitions:
                        if part.records:
                            offsets[part.partition_index] = part.high_watermark
                            moved.add(part.partition_index)
                if sessions:
                    session_id, epoch = response.session_id, epoch + 1
                cpu.append(time.process_time() - cpu_started)
            label = "session    " if sessions else "sessionless"
            steady = sorted(rtts[1:])
            print(f"consumer, {partitions:>5} partitions, {label}: response "
                  f"{statistics.median(sizes[1:]):>8,.0f} B, round trip "
                  f"p50 {statistics.median(steady) * 1000:.3f} ms "
                  f"p99 {steady[int(len(steady) * 0.99) - 1] * 1000:.3f} ms, "
                  f"CPU {statistics.mean(cpu[1:]) * 1000:.3f} ms per fetch")
        await client.close()
        await producer.close()
        await cluster.stop()


async def follower_cost(partitions: int) -> None:
    with tempfile.TemporaryDirectory() as data:
        cluster = Cluster(cluster_config(Path(data)), 3)
        await cluster.start()
        for broker in cluster.brokers.values():
            await broker.metadata_cache.wait_for(lambda s: len(s.brokers) == 3, 30_000)
        client = await RawClient.connect(cluster.brokers[0].port)
        await create(client, f"fol-{partitions}", partitions, rf=3)
        await client.close()
        await asyncio.sleep(2)  # let the followers settle into their sessions (a benchmark)
        named: list[int] = []
        for broker in cluster.brokers.values():
            manager = broker.replica_manager.fetch_manager
            original = manager.new_context

            def recording(metadata, parts, forgotten, *, is_follower, original=original, **kw):
                if is_follower:
                    named.append(len(parts))
                return original(metadata, parts, forgotten, is_follower=is_follower, **kw)

            manager.new_context = recording
        await asyncio.sleep(2)
        stats = [b.replica_manager.fetch_manager.stats() for b in cluster.brokers.values()]
        print(f"followers, {partitions:>5} partitions RF=3 idle for 2 s: {len(named)} fetches, "
              f"partitions named per fetch max {max(named, default=0)}; sessions cache "
              f"{sum(s['partitions'] for s in stats)} partitions")
        await cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    sizes = (1, 100) if parser.parse_args().quick else (1, 100, 1000, 10_000)
    for n in sizes:
        asyncio.run(consumer_cost(n))
    for n in sizes:
        asyncio.run(follower_cost(n))


if __name__ == "__main__":
    main()
