"""Metadata benchmark on the multi-process cluster: one topic of many partitions created through
CreateTopics on 3 `kafka-sim run` processes against a real ZooKeeper.

A probe keeps one connection per broker asking ApiVersions every 5 ms; the longest wait for an
answer is the longest the broker's event loop was stalled (plus a round trip). Prints the time
CreateTopics took, until every broker's metadata shows every partition with a leader, and the
longest and p99 answer time per broker while CreateTopics ran, then until all partitions were
led; then kill -9 of the controller's process, and the survivors' longest answer until the next
controller has loaded every partition state and told the brokers. `--partitions` (10,000 by default), `--brokers` (3); `--keep DIR` keeps the brokers' logs
there, `--debug-loop` runs the brokers in asyncio's debug mode (it logs each callback over 100 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the harness and the raw client live in tests/

from broker.server.zookeeper_runner import ZooKeeperServer  # noqa: E402
from protocol.errors import ErrorCode  # noqa: E402
from tests.integration.raw_client import RawClient  # noqa: E402
from tests.process_cluster import ProcessCluster  # noqa: E402

CREATE_TOPICS, METADATA, API_VERSIONS = 19, 3, 18
PROBE_S = 0.005


class AnswerProbe:
    """Asks one broker ApiVersions again and again; how long each answer took."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.waits: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self, client: RawClient) -> None:
        while True:
            started = time.perf_counter()
            await client.request(API_VERSIONS, 0, {})
            self.waits.append(time.perf_counter() - started)
            await asyncio.sleep(PROBE_S)

    async def start(self) -> None:
        self._client = await RawClient.connect(self.port)
        self._task = asyncio.create_task(self._run(self._client))

    def take(self) -> tuple[float, float]:
        """The longest and the p99 answer time so far (ms), and start counting afresh."""
        waits, self.waits = sorted(self.waits) or [0.0], []
        p99 = statistics.quantiles(waits, n=100)[98] if len(waits) >= 100 else waits[-1]
        return waits[-1] * 1000, p99 * 1000

    async def stop(self) -> tuple[float, float]:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._client.close()
        return self.take()


async def led_partitions(client: RawClient, topic: str) -> int:
    response = await client.request(METADATA, 1, {"topics": [{"name": topic}]})
    return sum(1 for t in response.topics if t.name == topic and t.error_code == 0
               for p in t.partitions if p.leader_id >= 0)


async def run(cluster: ProcessCluster, partitions: int) -> None:
    probes = [AnswerProbe(cluster.ports[i]) for i in cluster.ids]
    clients = [await RawClient.connect(cluster.ports[i]) for i in cluster.ids]
    for probe in probes:
        await probe.start()
    started = time.perf_counter()
    response = await clients[0].request(CREATE_TOPICS, 7, {
        "topics": [{"name": "bench-wide", "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 600_000, "validate_only": False})
    created = time.perf_counter() - started
    during = [probe.take() for probe in probes]
    if response.topics[0].error_code != ErrorCode.NONE:
        raise RuntimeError(f"CreateTopics failed: {response.topics[0].error_code}")
    for client in clients:
        while await led_partitions(client, "bench-wide") < partitions:
            await asyncio.sleep(1.0)  # each answer lists every partition: ask seldom
    everywhere = time.perf_counter() - started
    after = [probe.take() for probe in probes]
    for client in clients:
        await client.close()
    failover = await fail_over(cluster, probes)
    print(f"create 1 topic of {partitions} partitions (RF 1) on {len(probes)} processes: "
          f"CreateTopics {created:6.2f} s, led on every broker {everywhere:6.2f} s")
    for broker_id, (worst, p99), (worst_after, p99_after) in zip(cluster.ids, during, after,
                                                                   strict=True):
        print(f"  broker {broker_id}: longest answer {worst:7.1f} ms, p99 {p99:6.1f} ms during "
              f"CreateTopics; {worst_after:7.1f} ms, p99 {p99_after:6.1f} ms after it")
    print(failover)


async def fail_over(cluster: ProcessCluster, probes: list[AnswerProbe]) -> str:
    old = next(b["id"] for b in cluster.brokers(cluster.ids[0]) if b["controller"])
    started = time.perf_counter()
    cluster.kill(old, signal.SIGKILL)
    await probes[old].stop()
    survivors = [i for i in cluster.ids if i != old]
    for i in survivors:
        probes[i].take()

    def ready() -> int | None:
        for i in survivors:
            if "ready to serve as the new controller" in (
                    cluster.root / f"broker-{i}.log").read_text(errors="replace"):
                return i
        return None

    while (new := ready()) is None:
        await asyncio.sleep(0.2)
    took = time.perf_counter() - started
    stalls = {i: probes[i].take()[0] for i in survivors}
    for i in survivors:
        await probes[i].stop()
    return (f"kill -9 of controller {old}: broker {new} loaded and told everyone in {took:6.2f} s; "
            + ", ".join(f"broker {i} longest answer {w:7.1f} ms" for i, w in stalls.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="a folder for the brokers' data and logs")
    parser.add_argument("--debug-loop", action="store_true")
    args = parser.parse_args()
    if args.debug_loop:
        os.environ["PYTHONASYNCIODEBUG"] = "1"  # the broker processes inherit it
    with tempfile.TemporaryDirectory(prefix="bench-metadata-zk-") as tmp:
        tmp = str(args.keep) if args.keep else tmp
        zookeeper = ZooKeeperServer(Path(tmp) / "zookeeper")
        zookeeper.start()
        cluster = ProcessCluster(f"{zookeeper.connect_string}/bench", Path(tmp) / "cluster",
                                 args.brokers, {"log.level": "info"})
        try:
            cluster.start()
            asyncio.run(run(cluster, args.partitions))
        finally:
            cluster.stop()
            zookeeper.stop()


if __name__ == "__main__":
    main()
