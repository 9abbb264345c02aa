"""TimingWheel: one level of the hierarchical timing wheel, with its overflow level made on demand.

A wheel of `wheel_size` buckets, each `tick_ms` wide, covers `interval = tick_ms * wheel_size` ms
from `current_time` (always a multiple of `tick_ms`). A task due beyond that goes to the overflow
wheel, whose tick is this wheel's whole interval. Worked example with tick_ms=1, wheel_size=20,
starting at 0 (levels: 1 ms x 20 = 20 ms, 20 ms x 20 = 400 ms, 400 ms x 20 = 8000 ms):

- due at 2 ms: level 1, bucket 2 % 20 = 2, which covers [2, 3).
- due at 350 ms: beyond 20 ms, so level 2: bucket (350 // 20) % 20 = 17, covering [340, 360).
- due at 450 ms: beyond 400 ms, so level 3: bucket (450 // 400) % 20 = 1, covering [400, 800).
  When time reaches 400 the bucket is flushed and the task re-added: now 50 ms away, it lands on
  level 2 in bucket (450 // 20) % 20 = 2, covering [440, 460). At 440 that bucket is flushed in
  turn and the task lands on level 1 in bucket 450 % 20 = 10, covering [450, 451); it runs at 450.

A bucket index is reused once time has moved a whole interval on, which is safe because by then
the bucket has been flushed. Each bucket is queued (for the timer to wait on) only when its
expiration changes, so queue work is per bucket, not per task.
"""

from __future__ import annotations

from typing import Protocol

from timer.timer_task_list import TaskCounter, TimerTaskEntry, TimerTaskList


class BucketQueue(Protocol):
    """Where a wheel hands a bucket whose expiration changed (the timer's delay queue)."""

    def push(self, bucket: TimerTaskList) -> None: ...


class TimingWheel:
    __slots__ = (
        "tick_ms",
        "wheel_size",
        "interval",
        "level",
        "current_time",
        "buckets",
        "overflow_wheel",
        "_counter",
        "_queue",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        task_counter: TaskCounter,
        queue: BucketQueue,
        level: int = 1,
    ) -> None:
        if tick_ms <= 0 or wheel_size <= 0:
            raise ValueError("tick_ms and wheel_size must be positive")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self.level = level
        self.current_time = start_ms - (start_ms % tick_ms)
        self.buckets = [TimerTaskList(task_counter, level, i) for i in range(wheel_size)]
        self.overflow_wheel: TimingWheel | None = None
        self._counter = task_counter
        self._queue = queue

    def _add_overflow_wheel(self) -> TimingWheel:
        # Created lazily: most timers never hold a task more than one interval away.
        if self.overflow_wheel is None:
            self.overflow_wheel = TimingWheel(
                self.interval,
                self.wheel_size,
                self.current_time,
                self._counter,
                self._queue,
                self.level + 1,
            )
        return self.overflow_wheel

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place `entry`; False if it is cancelled or already due, and then the caller runs it."""
        task = entry.task
        if task is None or task.timer_task_entry is not entry:  # cancelled
            return False
        expiration = entry.expiration_ms
        wheel = self
        # Climb the levels in a loop (not recursion): this runs for every task at every downgrade.
        while True:
            current_time = wheel.current_time
            tick_ms = wheel.tick_ms
            if expiration < current_time + tick_ms:
                return False
            if expiration < current_time + wheel.interval:
                virtual_id = expiration // tick_ms
                bucket = wheel.buckets[virtual_id % wheel.wheel_size]
                bucket.add(entry)
                if bucket.set_expiration(virtual_id * tick_ms):
                    wheel._queue.push(bucket)
                return True
            wheel = wheel.overflow_wheel or wheel._add_overflow_wheel()

    def advance_clock(self, time_ms: int) -> None:
        """Move this level (and the levels above) to `time_ms`, rounded down to a tick."""
        if time_ms >= self.current_time + self.tick_ms:
            self.current_time = time_ms - (time_ms % self.tick_ms)
            if self.overflow_wheel is not None:
                self.overflow_wheel.advance_clock(self.current_time)
