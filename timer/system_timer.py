"""SystemTimer: the hierarchical timing wheel plus a min-heap of buckets, driven by a Clock.

The heap plays the role of Java's DelayQueue in Kafka: it holds (expiration, seq, bucket) and a
bucket is pushed only when its expiration changes, so adding a thousand tasks to one bucket costs
one push. An entry whose bucket has since been flushed or re-targeted no longer matches the
bucket's expiration; it is stale and skipped when it reaches the top.

Tasks run inline, on whoever calls `add` or `advance_clock` (the reaper, in the broker): there
are no threads. A task that raises is logged and does not disturb the timer.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import weakref
from collections.abc import Callable
from types import MethodType

from timer.clock import Clock
from timer.timer_task import TimerTask
from timer.timer_task_list import TaskCounter, TimerTaskEntry, TimerTaskList
from timer.timing_wheel import TimingWheel

log = logging.getLogger(__name__)


class BucketHeap:
    """A min-heap of buckets by expiration; `on_earliest_changed` hears of a new earliest one."""

    __slots__ = ("_heap", "_seq", "pushes", "on_earliest_changed")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = itertools.count()  # ties on expiration never compare buckets
        self.pushes = 0
        self.on_earliest_changed: Callable[[int], None] | None = None

    def push(self, bucket: TimerTaskList) -> None:
        expiration = bucket.expiration
        earliest = self.peek_expiration()
        heapq.heappush(self._heap, (expiration, next(self._seq), bucket))
        self.pushes += 1
        callback = self.on_earliest_changed
        if callback is not None and (earliest is None or expiration < earliest):
            callback(expiration)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and heap[0][2].expiration != heap[0][0]:
            heapq.heappop(heap)

    def peek_expiration(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> TimerTaskList | None:
        """The earliest bucket if it expires at or before `now_ms`, removed from the heap."""
        self._drop_stale()
        heap = self._heap
        if heap and heap[0][0] <= now_ms:
            return heapq.heappop(heap)[2]
        return None

    def __len__(self) -> int:
        return len(self._heap)


class SystemTimer:
    """A timer for many short delays: O(1) add and cancel, and per-bucket (not per-task) heap work."""

    def __init__(self, clock: Clock, tick_ms: int = 1, wheel_size: int = 20) -> None:
        self.clock = clock
        self._counter = TaskCounter()
        self.queue = BucketHeap()
        self.wheel = TimingWheel(tick_ms, wheel_size, clock.now_ms(), self._counter, self.queue)
        self._shut_down = False
        self.task_errors = 0
        # Work the reaper does each time it advances the clock (Kafka's reaper purges its
        # purgatory there): weak, so an owner gone leaves no callback behind.
        self._housekeeping: list[weakref.WeakMethod] = []

    # --- the timer's verbs -------------------------------------------------------------------

    def add(self, task: TimerTask) -> None:
        """Schedule `task` to run `task.delay_ms` from now; a task already due runs at once."""
        if self._shut_down:  # late adds during shutdown are dropped, as a stopped executor would
            return
        self._add_entry(TimerTaskEntry(task, task.delay_ms + self.clock.now_ms()))

    def advance_clock(self, now_ms: int | None = None) -> bool:
        """Run everything due by `now_ms` (default: the clock's now); True if any bucket was due.

        Each due bucket moves the wheels to its expiration and is flushed: entries that are due run,
        the others go back in, one level down (the "downgrade").
        """
        if self._shut_down:
            return False
        if self._housekeeping:
            self._run_housekeeping()
        now = self.clock.now_ms() if now_ms is None else now_ms
        bucket = self.queue.pop_due(now)
        if bucket is None:
            return False
        while bucket is not None:
            self.wheel.advance_clock(bucket.expiration)
            bucket.flush(self._add_entry)
            bucket = self.queue.pop_due(now)
        return True

    def add_housekeeping(self, method: MethodType) -> None:
        """Call the bound `method` on every advance of the clock, while its object lives."""
        self._housekeeping.append(weakref.WeakMethod(method))

    def remove_housekeeping(self, method: MethodType) -> None:
        self._housekeeping = [ref for ref in self._housekeeping if ref() != method]

    def _run_housekeeping(self) -> None:
        gone = False
        for ref in self._housekeeping:
            method = ref()
            if method is None:
                gone = True
                continue
            try:
                method()
            except Exception:
                self.task_errors += 1
                log.exception("timer housekeeping %r failed", method)
        if gone:  # an owner was collected: its callback goes
            self._housekeeping = [ref for ref in self._housekeeping if ref() is not None]

    def _add_entry(self, entry: TimerTaskEntry) -> None:
        if self.wheel.add(entry):
            return
        task = entry.task
        if task is not None and task.timer_task_entry is entry:  # due, not cancelled: run it
            task.timer_task_entry = None  # ran: a later cancel() must be a no-op
            try:
                task.run()
            except Exception:
                self.task_errors += 1
                log.exception("timer task %r failed", task)

    def shutdown(self) -> None:
        """Stop: later adds are ignored and pending tasks never run."""
        self._shut_down = True

    # --- what the reaper and the admin view look at ------------------------------------------

    @property
    def size(self) -> int:
        """Entries in buckets (a cancelled task leaves its bucket at once, so it is not counted)."""
        return self._counter.value

    def __len__(self) -> int:
        return self._counter.value

    def next_expiration_ms(self) -> int | None:
        """When the earliest queued bucket expires (it may hold only cancelled tasks); None if none."""
        return self.queue.peek_expiration()

    @property
    def on_earliest_changed(self) -> Callable[[int], None] | None:
        return self.queue.on_earliest_changed

    @on_earliest_changed.setter
    def on_earliest_changed(self, callback: Callable[[int], None] | None) -> None:
        self.queue.on_earliest_changed = callback
