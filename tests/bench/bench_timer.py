"""Timer benchmark: add, cancel and expire rates of SystemTimer, a heapq timer and loop.call_later.

Run `python tests/bench/bench_timer.py [--quick]`; prints one table row per timer and size.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import itertools
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

from timer import FunctionTimerTask, ManualClock, SystemTimer  # noqa: E402

SPREAD_MS = 60_000  # delays drawn uniformly from [1, 60 s]: request timeouts and fetch waits
CANCEL_FRACTION = 10  # cancel one task in ten (an op that completes before its timeout)


@dataclass(slots=True)
class Result:
    timer: str
    pending: int
    add_s: float
    cancel_s: float
    cancelled: int
    expire_s: float
    expired: int
    heap_pushes: int


class HeapTimer:
    """The obvious alternative: one heap entry per task, cancel by marking (lazy deletion)."""

    def __init__(self) -> None:
        self.heap: list[list] = []
        self.seq = itertools.count()
        self.now = 0
        self.pushes = 0

    def add(self, delay_ms: int, fn: Callable[[], object]) -> list:
        entry = [self.now + delay_ms, next(self.seq), fn]
        heapq.heappush(self.heap, entry)
        self.pushes += 1
        return entry

    @staticmethod
    def cancel(entry: list) -> None:
        entry[2] = None

    def advance(self, now: int) -> None:
        self.now = now
        heap = self.heap
        while heap and heap[0][0] <= now:
            fn = heapq.heappop(heap)[2]
            if fn is not None:
                fn()


class WarpLoop(asyncio.SelectorEventLoop):
    """A stock event loop whose clock can be pushed forward, so expiry costs no real waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = 0.0

    def time(self) -> float:
        return super().time() + self.offset


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_system_timer(delays: list[int], cancel_idx: list[int]) -> Result:
    clock = ManualClock()
    timer = SystemTimer(clock)
    counter = itertools.count()
    fn = counter.__next__
    tasks: list[FunctionTimerTask] = []

    def add() -> None:
        append, timer_add = tasks.append, timer.add
        for d in delays:
            task = FunctionTimerTask(d, fn)
            timer_add(task)
            append(task)

    def cancel() -> None:
        for i in cancel_idx:
            tasks[i].cancel()

    def expire() -> None:
        # What the reaper does: wake at each due bucket's expiration and advance to it.
        while (next_ms := timer.next_expiration_ms()) is not None:
            clock.set(max(next_ms, clock.now_ms()))
            timer.advance_clock(next_ms)

    add_s, cancel_s, expire_s = timed(add), timed(cancel), timed(expire)
    expired = next(counter)
    assert expired == len(delays) - len(cancel_idx) and timer.size == 0
    return Result(
        "SystemTimer",
        len(delays),
        add_s,
        cancel_s,
        len(cancel_idx),
        expire_s,
        expired,
        timer.queue.pushes,
    )


def bench_heap_timer(delays: list[int], cancel_idx: list[int]) -> Result:
    timer = HeapTimer()
    counter = itertools.count()
    fn = counter.__next__
    entries: list[list] = []

    def add() -> None:
        append, timer_add = entries.append, timer.add
        for d in delays:
            append(timer_add(d, fn))

    def cancel() -> None:
        for i in cancel_idx:
            timer.cancel(entries[i])

    def expire() -> None:
        heap = timer.heap
        while heap:
            timer.advance(heap[0][0])

    add_s, cancel_s, expire_s = timed(add), timed(cancel), timed(expire)
    expired = next(counter)
    assert expired == len(delays) - len(cancel_idx)
    return Result(
        "heapq", len(delays), add_s, cancel_s, len(cancel_idx), expire_s, expired, timer.pushes
    )


def bench_call_later(delays: list[int], cancel_idx: list[int]) -> Result:
    loop = WarpLoop()
    expected = len(delays) - len(cancel_idx)
    fired = 0
    done = loop.create_future()

    def fn() -> None:
        nonlocal fired
        fired += 1
        if fired == expected:
            done.set_result(None)

    handles: list[asyncio.TimerHandle] = []

    def add() -> None:
        append, call_later = handles.append, loop.call_later
        for d in delays:
            append(call_later(d / 1000, fn))

    def cancel() -> None:
        for i in cancel_idx:
            handles[i].cancel()

    def expire() -> None:
        loop.offset = SPREAD_MS / 1000 + 1
        loop.run_until_complete(done)

    try:
        add_s, cancel_s, expire_s = timed(add), timed(cancel), timed(expire)
    finally:
        loop.close()
    assert fired == expected
    return Result(
        "loop.call_later",
        len(delays),
        add_s,
        cancel_s,
        len(cancel_idx),
        expire_s,
        fired,
        len(delays),
    )


def rate(ops: int, seconds: float) -> str:
    per_s = ops / seconds if seconds > 0 else float("inf")
    return f"{per_s / 1e6:.2f} M/s" if per_s >= 1e6 else f"{per_s / 1e3:.0f} k/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="only 10k and 100k pending tasks")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    print(
        f"python {sys.version.split()[0]}, delays uniform in [1, {SPREAD_MS}] ms, "
        f"1 in {CANCEL_FRACTION} cancelled, gc off while timing; rates are operations/second"
    )
    header = (
        f"{'pending':>9}  {'timer':<16}{'add':>11}{'cancel':>11}{'expire':>11}{'heap pushes':>13}"
    )
    print(header)
    print("-" * len(header))
    for n in sizes:
        rng = random.Random(args.seed)
        delays = [rng.randint(1, SPREAD_MS) for _ in range(n)]
        cancel_idx = rng.sample(range(n), n // CANCEL_FRACTION)
        for bench in (bench_system_timer, bench_heap_timer, bench_call_later):
            gc.collect()
            gc.disable()
            try:
                r = bench(delays, cancel_idx)
            finally:
                gc.enable()
            print(
                f"{r.pending:>9,}  {r.timer:<16}{rate(r.pending, r.add_s):>11}"
                f"{rate(r.cancelled, r.cancel_s):>11}{rate(r.expired, r.expire_s):>11}"
                f"{r.heap_pushes:>13,}"
            )
        print()


if __name__ == "__main__":
    main()
