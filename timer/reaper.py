"""ExpiredOperationReaper: the asyncio task that sleeps until the timer's next bucket is due."""

from __future__ import annotations

import asyncio
import contextlib

from timer.clock import Clock
from timer.system_timer import SystemTimer


class ExpiredOperationReaper:
    """Drives a SystemTimer from an event loop without polling.

    It waits on an event, with a deadline at the earliest bucket's expiration (or no deadline when
    the timer is empty). The timer wakes it when a bucket earlier than that is queued, and a clock
    with listeners (ManualClock, VirtualClock) wakes it on every change, so whoever moves time sees
    the reaper follow at once. A clock that is not `ticking` (manual, or virtual and frozen) gets
    no real deadline: its time moves only by calls.
    """

    def __init__(self, timer: SystemTimer, clock: Clock) -> None:
        self.timer = timer
        self.clock = clock
        self.wakeups = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._listens = hasattr(clock, "add_listener")

    def _on_signal(self, _ms: int) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("reaper already started")
        self._stopping = False
        self.timer.on_earliest_changed = self._on_signal
        if self._listens:
            self.clock.add_listener(self._on_signal)  # type: ignore[attr-defined]
        self._task = asyncio.get_running_loop().create_task(self._run(), name="timer-reaper")

    async def stop(self) -> None:
        task = self._task
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self._task = None
        if self.timer.on_earliest_changed == self._on_signal:
            self.timer.on_earliest_changed = None
        if self._listens:
            self.clock.remove_listener(self._on_signal)  # type: ignore[attr-defined]

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            self.timer.advance_clock(self.clock.now_ms())
            next_ms = self.timer.next_expiration_ms()
            # Nothing awaits between computing next_ms and clearing: no signal can be lost.
            self._wake.clear()
            handle = None
            if next_ms is not None and getattr(self.clock, "ticking", True):
                delay_s = max(0, next_ms - self.clock.now_ms()) / 1000
                handle = loop.call_later(delay_s, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                if handle is not None:
                    handle.cancel()
            self.wakeups += 1
