"""Metadata-store benchmark: CreateTopics on the embedded 3-broker cluster (one process, one loop).

Creates 1000 topics (1 partition, RF 3; 100 per request), then one topic of 10,000 partitions
(RF 1, so that its logs fit the fd limit), over TCP, while a probe task measures how long the
event loop is stalled (the worst and the 99th percentile gap past a 5 ms sleep). Then the same
nodes written straight into the store (the config, topic and partition-state nodes CreateTopics
and the controller write), which leaves out the brokers' log creation. Prints times and stalls.
`--quick` creates 200 topics and 2,000 partitions.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the harness and the raw client live in tests/

from broker.metadata.embedded_store import EmbeddedMetadataStore  # noqa: E402
from broker.server.cluster import Cluster  # noqa: E402
from protocol.errors import ErrorCode  # noqa: E402
from tests.harness import cluster_config  # noqa: E402
from tests.integration.raw_client import RawClient  # noqa: E402

CREATE_TOPICS = 19
PROBE_S = 0.005


class LoopLagProbe:
    """Sleeps PROBE_S again and again; what it oversleeps is how long the loop could not run it."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None
        self._slept_at = 0.0

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._slept_at = loop.time()
            await asyncio.sleep(PROBE_S)
            self.lags.append(loop.time() - self._slept_at - PROBE_S)

    def start(self) -> None:
        self.lags.clear()
        self._slept_at = asyncio.get_running_loop().time()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> tuple[float, float]:
        """The worst and the p99 stall, in ms."""
        assert self._task is not None
        # The sleep in progress counts too: a run that never yields is one stall, not none.
        self.lags.append(max(0.0, asyncio.get_running_loop().time() - self._slept_at - PROBE_S))
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        lags = sorted(self.lags) or [0.0]
        p99 = statistics.quantiles(lags, n=100)[98] if len(lags) >= 100 else lags[-1]
        return lags[-1] * 1000, p99 * 1000


async def create(client: RawClient, topics: list[dict]) -> None:
    response = await client.request(CREATE_TOPICS, 7, {
        "topics": [{"assignments": [], "configs": [], **t} for t in topics],
        "timeout_ms": 600_000, "validate_only": False})
    errors = {t.name: t.error_code for t in response.topics if t.error_code != ErrorCode.NONE}
    if errors:
        raise RuntimeError(f"CreateTopics failed: {errors}")


async def run(topics: int, partitions: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-metadata-") as tmp:
        cluster = Cluster(cluster_config(Path(tmp), {"log.level": "warning"}), 3)
        await cluster.start()
        for broker in cluster.brokers.values():
            await broker.metadata_cache.wait_for(lambda s: s.controller_id >= 0, 30_000)
        client = await RawClient.connect(cluster.brokers[0].port)
        probe = LoopLagProbe()
        try:
            probe.start()
            started = time.perf_counter()
            for first in range(0, topics, 100):
                await create(client, [{"name": f"bench-{i}", "num_partitions": 1,
                                       "replication_factor": 3}
                                      for i in range(first, min(first + 100, topics))])
            elapsed = time.perf_counter() - started
            worst, p99 = await probe.stop()
            print(f"create {topics} topics (RF 3): {elapsed:7.2f} s  "
                  f"({topics / elapsed:6.0f} topics/s)  loop stall max {worst:7.1f} ms, "
                  f"p99 {p99:6.1f} ms")

            probe.start()
            started = time.perf_counter()
            await create(client, [{"name": "bench-wide", "num_partitions": partitions,
                                   "replication_factor": 1}])
            elapsed = time.perf_counter() - started
            # CreateTopics answers once the metadata shows the topic; the brokers are handed its
            # partitions (and create their logs) after that, in chunks: wait for the last one.
            while sum(1 for b in cluster.brokers.values() for key in b.replica_manager.partitions
                      if key[0] == "bench-wide") < partitions:
                await asyncio.sleep(0.05)
            hosted = time.perf_counter() - started
            worst, p99 = await probe.stop()
            print(f"create 1 topic of {partitions} partitions (RF 1): {elapsed:7.2f} s, every "
                  f"log created {hosted:7.2f} s  loop stall max {worst:7.1f} ms, p99 {p99:6.1f} ms")
        finally:
            await client.close()
            await cluster.stop()


async def write_topic(store: EmbeddedMetadataStore, name: str, partitions: int) -> None:
    """The nodes one new topic costs in the store, as admin_manager and the controller write them."""
    await store.create_json(f"/config/topics/{name}", {"version": 1, "config": {}}, makepath=True)
    await store.create_json(f"/brokers/topics/{name}", {
        "version": 3, "topic_id": "00000000-0000-0000-0000-000000000000",
        "partitions": {str(p): [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(partitions)},
        "adding_replicas": {}, "removing_replicas": {}}, makepath=True)
    for p in range(partitions):
        await store.create_json(f"/brokers/topics/{name}/partitions/{p}/state", {
            "leader": p % 3, "leader_epoch": 0, "isr": [p % 3, (p + 1) % 3, (p + 2) % 3],
            "controller_epoch": 1, "version": 1}, makepath=True)


async def run_store(topics: int, partitions: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-metadata-") as tmp:
        store = EmbeddedMetadataStore(Path(tmp) / "metadata-store")
        flush = getattr(store, "flush", None)  # None: the store before the journal saved in place
        probe = LoopLagProbe()
        for label, count, width in ((f"{topics} topics", topics, 1),
                                    (f"1 topic of {partitions} partitions", 1, partitions)):
            probe.start()
            started = time.perf_counter()
            for i in range(count):
                await write_topic(store, f"{label[0]}-{i}-{width}", width)
                if flush is not None:
                    await flush()  # what CreateTopics awaits before it answers
                await asyncio.sleep(0)
            elapsed = time.perf_counter() - started
            worst, p99 = await probe.stop()
            print(f"store only, {label}: {elapsed:7.2f} s  loop stall max {worst:7.1f} ms, "
                  f"p99 {p99:6.1f} ms")
        getattr(store, "close", lambda: None)()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="200 topics, 2,000 partitions")
    parser.add_argument("--topics", type=int)
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--store-only", action="store_true", help="skip the cluster part")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a segment file per partition
    topics = args.topics or (200 if args.quick else 1000)
    partitions = args.partitions or (2000 if args.quick else 10_000)
    print(f"== metadata store: CreateTopics on 3 embedded brokers ({Path(ROOT).name})")
    if not args.store_only:
        asyncio.run(run(topics, partitions))
    asyncio.run(run_store(topics, partitions))


if __name__ == "__main__":
    main()
