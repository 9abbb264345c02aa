"""SimulatedLoop: an asyncio event loop on simulated time, for `kafka-sim simulate`.

Time jumps to the next timer whenever nothing is ready, so a simulated minute of timeouts costs
only the work done in it; work handed to a thread runs at once on the loop's own thread, so one
seed gives one order of events.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any


class SimulationStalled(RuntimeError):
    """Nothing is ready and no timer is set: every task waits for something that never comes."""


class _SimulatedSelector(selectors.DefaultSelector):
    """Polls the real descriptors without waiting (the loop's self-pipe, idle listening sockets),
    then moves simulated time forward by the timeout the loop would have slept."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: SimulatedLoop | None = None

    def select(self, timeout: float | None = None) -> list:
        events = super().select(0)
        if events or timeout == 0:
            return events
        assert self.loop is not None
        if timeout is None:
            raise SimulationStalled("no task can make progress and no timer is set")
        self.loop.advance(timeout)
        return []


class SimulatedLoop(asyncio.SelectorEventLoop):
    """`time()` is simulated seconds from 0; `run_in_executor` runs its function in place."""

    def __init__(self) -> None:
        selector = _SimulatedSelector()
        super().__init__(selector)
        selector.loop = self
        self._now = 0.0
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def run_in_executor(self, executor: Executor | None, func: Callable[..., Any],
                        *args: Any) -> asyncio.Future:
        # No thread: a worker's result would otherwise arrive at a moment the seed does not fix.
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, as a thread's
            future.set_exception(exc)
        return future
