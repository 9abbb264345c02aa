"""The long protocol fuzzing run (`make fuzz`): FUZZ_INPUTS inputs (default 1,000,000) against
one in-process broker, 1% of them over TCP to its listener; prints the figures and exits 1 on
any failed oracle.

    FUZZ_INPUTS=N FUZZ_SEED=S .venv/bin/python tests/fuzz/fuzz_long.py

The controller's own APIs (LeaderAndIsr, UpdateMetadata...) join in the last 5% of the inputs,
without the admin requests that wait for the metadata cache (grammar.advertised says why).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.server.log_setup import configure_logging  # noqa: E402
from tests.fuzz.campaign import RunStats, corpus_frames, inputs, scratch_dir  # noqa: E402
from tests.fuzz.grammar import RandomSource, advertised  # noqa: E402
from tests.fuzz.target import FuzzBroker, FuzzFailure, rss_bytes  # noqa: E402

TCP_EVERY = 100  # one input in a hundred goes over a real socket
PROBE_EVERY = 10_000  # a fresh connection is served within a second
REPORT_EVERY = 50_000
MAX_RSS_GROWTH = 512 << 20  # the broker's state grows with what the inputs create; not more
SHOW_FAILURES = 10


class Run:
    """One long run: the broker, the figures, and the progress lines."""

    def __init__(self, broker: FuzzBroker) -> None:
        self.broker = broker
        self.stats = RunStats()
        self.rss_start = rss_bytes()
        self.started = self.last = time.perf_counter()

    async def judge(self, data: bytes) -> None:
        stats = self.stats
        n = stats.inputs + 1
        try:
            run = self.broker.run_tcp if n % TCP_EVERY == 0 else self.broker.run
            stats.add(await run(data))
            if n % PROBE_EVERY == 0:
                await self.broker.served_promptly()
        except FuzzFailure as failure:
            stats.fail(failure)
            if len(stats.failures) <= SHOW_FAILURES:
                print(f"FAILURE {len(stats.failures)}: {failure}", flush=True)
        if n % REPORT_EVERY == 0:
            now = time.perf_counter()
            print(f"{n:>9,} inputs  {REPORT_EVERY / (now - self.last):7.0f}/s  "
                  f"failures {len(stats.failures)}  max latency {stats.max_seconds * 1000:.0f} ms "
                  f"(wall {stats.max_wall_seconds * 1000:.0f} ms)  "
                  f"RSS {rss_bytes() >> 20} MiB", flush=True)
            self.last = now

    def report(self) -> RunStats:
        stats = self.stats
        elapsed = time.perf_counter() - self.started
        rss_end = rss_bytes()
        kinds = {k: sum(f.kind == k for f in stats.failures) for k in ("crash", "hang", "slow")}
        print(f"inputs {stats.inputs:,} in {elapsed:.0f} s ({stats.inputs / elapsed:.0f}/s); "
              f"answered {stats.answered:,}, connections closed {stats.closed:,}; "
              f"crashes {kinds['crash']}, hangs {kinds['hang']}, slow answers {kinds['slow']}; "
              f"max latency {stats.max_seconds * 1000:.0f} ms "
              f"({stats.max_wall_seconds * 1000:.0f} ms of wall clock, run-queue waits included); "
              f"RSS start {self.rss_start >> 20} MiB, end {rss_end >> 20} MiB")
        if rss_end - self.rss_start > MAX_RSS_GROWTH:
            stats.failures.append(FuzzFailure(
                f"RSS grew by {(rss_end - self.rss_start) >> 20} MiB", b""))
        return stats


async def fuzz(total: int, seed: int) -> RunStats:
    data_dir = scratch_dir()
    broker = await FuzzBroker(data_dir).start()
    src = RandomSource(random.Random(seed))
    corpus = corpus_frames()
    run = Run(broker)
    print(f"fuzzing {total:,} inputs (seed {seed}, {len(corpus)} captured frames), "
          f"RSS {run.rss_start >> 20} MiB", flush=True)
    try:
        for apis, until in ((advertised(), total - total // 20),
                            (advertised(controller_apis=True), total)):
            for data in inputs(src, apis, corpus):
                if run.stats.inputs >= until:
                    break
                await run.judge(data)
        await broker.served_promptly()
    finally:
        await broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return run.report()


def main() -> int:
    configure_logging("critical", json=False)  # the broker's warnings on bad input, by the million
    total = int(os.environ.get("FUZZ_INPUTS", "1000000"))
    seed = int(os.environ.get("FUZZ_SEED", "0"))
    stats = asyncio.run(fuzz(total, seed))
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
