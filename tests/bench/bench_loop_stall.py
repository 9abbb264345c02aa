"""Longest event-loop stall while a broker with many partitions stops and starts again (clean,
then after a crash: no clean-shutdown marker, so every log is recovered).

Run: .venv/bin/python tests/bench/bench_loop_stall.py [--partitions 1000] [--segments 3]
The embedded cluster shares one loop: a stall here stalls every other broker and client too.
What remains (~100-250 ms on a loaded 2-core machine) is mostly gen-2 garbage collections, which
hold the GIL whichever thread triggers them, not file I/O.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without install

from broker.server.cluster import Cluster  # noqa: E402
from broker.server.log_setup import configure_logging  # noqa: E402
from protocol.records import encode_batch  # noqa: E402
from storage.naming import CLEAN_SHUTDOWN_FILE  # noqa: E402
from tests.harness import cluster_config  # noqa: E402
from tests.integration.raw_client import RawClient  # noqa: E402
from tests.integration.test_hostile_input import PRODUCE, create_topic  # noqa: E402
from tests.integration.test_protocol_edges import produce_body  # noqa: E402

TOPIC_PARTITIONS = 100


async def longest_stall(action) -> tuple[float, float]:
    """(seconds `action` took, longest time a 1 ms sleep overslept meanwhile)."""
    lags: list[float] = [0.0]
    probing = True

    async def probe() -> None:
        while probing:
            started = time.monotonic()
            await asyncio.sleep(0.001)
            lags.append(time.monotonic() - started - 0.001)

    task = asyncio.ensure_future(probe())
    await asyncio.sleep(0.01)
    started = time.monotonic()
    await action()
    took = time.monotonic() - started
    probing = False
    await task
    return took, max(lags)


async def main(partitions: int, segments: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(cluster_config(Path(tmp) / "data"), 1)
        await cluster.start()
        try:
            broker = cluster.brokers[0]
            await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
            client = await RawClient.connect(broker.port)
            topics = [f"t{i}" for i in range(max(partitions // TOPIC_PARTITIONS, 1))]
            for topic in topics:
                await create_topic(client, topic, min(partitions, TOPIC_PARTITIONS),
                                   {"segment.bytes": "1100"})
            await broker.metadata_cache.wait_for(
                lambda s: sum(1 for p in s.partitions.values() if p.leader == 0) >= partitions,
                60_000)
            batch = encode_batch([(b"k", b"v" * 1000, [], int(time.time() * 1000))])
            for _ in range(segments):  # one batch per segment (segment.bytes 1100)
                for topic in topics:
                    await client.request(PRODUCE, 9, produce_body(
                        {(topic, p): batch for p in range(min(partitions, TOPIC_PARTITIONS))}))
            await client.close()
            data_dir = broker.config.data_dir
            for label in ("clean", "after a crash"):
                took, stall = await longest_stall(lambda: cluster.stop_broker(0))
                print(f"stop:  {took:6.2f} s, longest loop stall {stall * 1000:7.1f} ms")
                if label != "clean":
                    (data_dir / CLEAN_SHUTDOWN_FILE).unlink()
                took, stall = await longest_stall(lambda: cluster.start_broker(0))
                print(f"start ({label}): {took:6.2f} s, longest loop stall {stall * 1000:7.1f} ms")
        finally:
            await cluster.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=3)
    args = parser.parse_args()
    configure_logging("warning")
    asyncio.run(main(args.partitions, args.segments))
