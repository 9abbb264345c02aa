"""Clocks in whole milliseconds: the Clock protocol, a monotonic clock, and a manual clock for tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

ClockListener = Callable[[int], None]


class Clock(Protocol):
    """Anything that tells the time in milliseconds; only differences between readings matter."""

    def now_ms(self) -> int: ...


class MonotonicClock:
    """The production clock: never goes backwards, unaffected by wall-clock changes."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to, so timer tests are deterministic and never sleep.

    Listeners are called with the new time after every change; the reaper uses this to wake up
    when a test moves time forward.
    """

    __slots__ = ("_now_ms", "_listeners")

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms
        self._listeners: list[ClockListener] = []

    def now_ms(self) -> int:
        return self._now_ms

    @property
    def ticking(self) -> bool:
        """Time never passes by itself here: the reaper waits for a listener's call, not a deadline."""
        return False

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a clock cannot go back ({ms} ms)")
        self.set(self._now_ms + ms)

    def set(self, ms: int) -> None:
        # Timers rely on time never going back, as it never does on a monotonic clock.
        if ms < self._now_ms:
            raise ValueError(f"a clock cannot go back (from {self._now_ms} to {ms} ms)")
        self._now_ms = ms
        for listener in list(self._listeners):  # a listener may remove itself
            listener(ms)

    def add_listener(self, callback: ClockListener) -> None:
        self._listeners.append(callback)

    def remove_listener(self, callback: ClockListener) -> None:
        self._listeners.remove(callback)
