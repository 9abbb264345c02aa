"""VirtualClock: a cluster's switchable clock, real until frozen, then moved only by `advance`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from timer.clock import ClockListener


@dataclass(slots=True, frozen=True)
class ClockState:
    """What `ctl clock` shows: frozen or running, the broker's times and their skew from real time."""

    frozen: bool
    now_ms: int  # the monotonic reading every timeout is measured on
    wall_ms: int  # the epoch milliseconds retention, roll and transaction timestamps use
    offset_ms: int  # how far the broker's time is ahead of real time (negative: behind)

    def to_dict(self) -> dict:
        return {"frozen": self.frozen, "now_ms": self.now_ms, "wall_ms": self.wall_ms,
                "offset_ms": self.offset_ms}


class VirtualClock:
    """Real time plus an offset while running; a fixed reading while frozen.

    Both readings (monotonic and wall) share the offset, so a timeout measured on one and a
    timestamp compared on the other move together. Neither ever goes back: resuming continues
    from the frozen reading (the offset absorbs the frozen span), and `advance` only adds.
    Listeners hear of every change, as a ManualClock's do, so the reaper wakes on `advance` and
    stops relying on a real deadline while frozen (`ticking`).
    """

    __slots__ = ("_monotonic", "_wall", "_offset_ms", "_frozen_at", "_listeners")

    def __init__(self, monotonic_ms: Callable[[], int] | None = None,
                 wall_ms: Callable[[], int] | None = None) -> None:
        self._monotonic = monotonic_ms or (lambda: time.monotonic_ns() // 1_000_000)
        self._wall = wall_ms or (lambda: time.time_ns() // 1_000_000)
        self._offset_ms = 0
        self._frozen_at: int | None = None  # the real monotonic reading when frozen
        self._listeners: list[ClockListener] = []

    @property
    def frozen(self) -> bool:
        return self._frozen_at is not None

    @property
    def ticking(self) -> bool:
        """Whether time passes by itself (the reaper may then wait on a real deadline)."""
        return self._frozen_at is None

    def _real_elapsed_ms(self) -> int:
        # While frozen, real time stopped counting at the freeze.
        return self._monotonic() if self._frozen_at is None else self._frozen_at

    def now_ms(self) -> int:
        return self._real_elapsed_ms() + self._offset_ms

    def wall_ms(self) -> int:
        frozen_span = 0 if self._frozen_at is None else self._monotonic() - self._frozen_at
        return self._wall() - frozen_span + self._offset_ms

    def freeze(self) -> None:
        if self._frozen_at is None:
            self._frozen_at = self._monotonic()
            self._notify()

    def resume(self) -> None:
        if self._frozen_at is not None:
            # Continue from the frozen reading: the span spent frozen comes off the offset.
            self._offset_ms -= self._monotonic() - self._frozen_at
            self._frozen_at = None
            self._notify()

    def advance(self, ms: int) -> None:
        """Move the clock `ms` forward (frozen or running); what came due fires on the next wake."""
        if ms < 0:
            raise ValueError(f"a clock cannot go back ({ms} ms)")
        self._offset_ms += ms
        self._notify()

    def state(self) -> ClockState:
        frozen_span = 0 if self._frozen_at is None else self._monotonic() - self._frozen_at
        return ClockState(self.frozen, self.now_ms(), self.wall_ms(), self._offset_ms - frozen_span)

    def _notify(self) -> None:
        now = self.now_ms()
        for listener in list(self._listeners):
            listener(now)

    def add_listener(self, callback: ClockListener) -> None:
        self._listeners.append(callback)

    def remove_listener(self, callback: ClockListener) -> None:
        self._listeners.remove(callback)
