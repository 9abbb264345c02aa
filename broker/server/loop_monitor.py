"""The event loop's health: how late a periodic tick runs (the lag every client of the process
feels), kept for the last minute, a watchdog thread that names the task holding the loop when one
step runs longer than a second, and the cyclic garbage collector kept from holding it.

A full collection walks every object the collector tracks (~0.3 s a million: 10,000 partitions
with three replicas in one process are 4 million), and while a heap grows Python runs one each
time it is a quarter larger. Once a full collection takes over GC_FREEZE_AFTER_MS, what survived it
is frozen (gc.freeze: never walked again) and the next walks only what came since. The price: a
frozen object that later becomes cyclic garbage is never reclaimed by this process.

The tick follows real time, never the cluster's virtual clock: a frozen clock stalls nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass

from broker.logs import get_logger

log = get_logger("kafka_sim.event_loop")
TICK_S = 0.1
WINDOW_S = 60.0
HELD_WARNING_S = 1.0
WATCHDOG_POLL_S = 0.25
GC_FREEZE_AFTER_MS = 50.0


@dataclass(frozen=True, slots=True)
class LoopLag:
    """Lateness of the ticks over the last minute, in milliseconds."""

    max_ms: float
    p99_ms: float
    samples: int

    def to_dict(self) -> dict:
        return {"lag_max_ms": round(self.max_ms, 3), "lag_p99_ms": round(self.p99_ms, 3),
                "samples": self.samples}


class LoopMonitor:
    def __init__(self, *, tick_s: float = TICK_S, window_s: float = WINDOW_S,
                 held_warning_s: float = HELD_WARNING_S) -> None:
        self.tick_s = tick_s
        self.held_warning_s = held_warning_s
        self._lags: deque[tuple[float, float]] = deque()  # (monotonic time, lag s)
        self._window_s = window_s
        self._task: asyncio.Task | None = None
        self._watchdog: threading.Thread | None = None
        self._stopping = threading.Event()
        self._last_tick = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.held_warnings = 0  # steps reported as holding the loop
        self.gc_max_pause_ms = 0.0  # the longest full collection seen
        self._gc_started = 0.0
        self._freeze_wanted = False
        self._froze = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._last_tick = time.monotonic()
        self._task = asyncio.ensure_future(self._ticks())
        self._watchdog = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._watchdog.start()
        gc.callbacks.append(self._on_collection)

    async def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_collection)
        if self._froze:  # what the cluster leaves behind may be collected again
            gc.unfreeze()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._watchdog is not None:
            await asyncio.to_thread(self._watchdog.join)

    async def _ticks(self) -> None:
        while True:
            due = time.monotonic() + self.tick_s
            await asyncio.sleep(self.tick_s)
            now = time.monotonic()
            self._last_tick = now
            if self._freeze_wanted:  # here, not inside the collector's callback
                self._freeze_wanted = False
                self._froze = True
                gc.freeze()
            self._lags.append((now, max(0.0, now - due)))
            while self._lags and self._lags[0][0] < now - self._window_s:
                self._lags.popleft()

    def lag(self) -> LoopLag:
        lags = sorted(lag for _, lag in self._lags)
        if not lags:
            return LoopLag(0.0, 0.0, 0)
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
        return LoopLag(lags[-1] * 1000, p99 * 1000, len(lags))

    def _on_collection(self, phase: str, info: dict) -> None:
        """gc.callbacks: the length of each full collection (any thread's)."""
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        pause_ms = (time.perf_counter() - self._gc_started) * 1000
        self.gc_max_pause_ms = max(self.gc_max_pause_ms, pause_ms)
        if pause_ms > GC_FREEZE_AFTER_MS:
            self._freeze_wanted = True

    # -- the watchdog (its own thread: it runs while the loop is held) --------------------------

    def _watch(self) -> None:
        reported = False
        last_poll = time.monotonic()
        while not self._stopping.wait(WATCHDOG_POLL_S):
            now = time.monotonic()
            # This thread overslept as much: the whole process was stopped (SIGSTOP), not the loop
            stopped = now - last_poll > WATCHDOG_POLL_S + self.held_warning_s / 2
            last_poll = now
            held = now - self._last_tick - self.tick_s
            if held < self.held_warning_s or stopped:
                reported = reported and not stopped
                continue
            if not reported:
                reported = True
                self.held_warnings += 1
                task, where = self._holder()
                log.warning("event loop held", held_s=round(held, 2), task=task, where=where)

    def _holder(self) -> tuple[str, str]:
        """The task running on the loop and the innermost frames of the loop's thread."""
        task = None
        if self._loop is not None:
            # asyncio's table of running tasks, read from this thread: a snapshot, no lock
            task = asyncio.tasks._current_tasks.get(self._loop)  # type: ignore[attr-defined]
        frame = sys._current_frames().get(self._loop_thread)
        stack = traceback.extract_stack(frame)[-4:] if frame is not None else []
        where = " <- ".join(f"{f.name} ({f.filename.rsplit('/', 1)[-1]}:{f.lineno})"
                            for f in reversed(stack))
        return (task.get_name() if task is not None else "(a callback, no task)"), where
