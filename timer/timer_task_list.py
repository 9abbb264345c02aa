"""Timer buckets: TimerTaskEntry (a task placed at an expiration) and TimerTaskList (one bucket).

A bucket is a circular doubly linked list with a sentinel root, so adding and removing an entry are
O(1) and need no search. Every bucket of every wheel level shares one TaskCounter, which is the
timer's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from timer.timer_task import TimerTask


@dataclass(slots=True)
class TaskCounter:
    """Number of entries in all buckets of one timer (shared by reference, like an AtomicInteger)."""

    value: int = 0


class TimerTaskEntry:
    """A task's place in a bucket: its absolute expiration and its links in the bucket's list."""

    __slots__ = ("task", "expiration_ms", "next", "prev", "list")

    def __init__(self, task: TimerTask | None, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.next: TimerTaskEntry | None = None
        self.prev: TimerTaskEntry | None = None
        self.list: TimerTaskList | None = None
        if task is not None:
            task.set_timer_task_entry(self)

    @property
    def cancelled(self) -> bool:
        # Cancelling the task, or adding it again, detaches this entry from it.
        task = self.task
        return task is None or task.timer_task_entry is not self

    def remove(self) -> None:
        bucket = self.list
        if bucket is not None:
            bucket.remove(self)

    def __repr__(self) -> str:
        return f"TimerTaskEntry(expiration_ms={self.expiration_ms}, task={self.task!r})"


class TimerTaskList:
    """One bucket: the entries whose expirations fall in one tick-sized slot of one wheel level.

    `expiration` is the start of the slot the bucket currently stands for, or -1 when it is empty
    and not queued. `level` and `index` say where the bucket sits, for tests and the admin view.
    """

    __slots__ = ("_root", "_counter", "_expiration_ms", "_size", "level", "index")

    def __init__(self, task_counter: TaskCounter, level: int = 0, index: int = 0) -> None:
        root = TimerTaskEntry(None, -1)
        root.next = root
        root.prev = root
        self._root = root
        self._counter = task_counter
        self._expiration_ms = -1
        self._size = 0
        self.level = level
        self.index = index

    @property
    def expiration(self) -> int:
        return self._expiration_ms

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True iff it changed, i.e. the bucket must be (re)queued."""
        if self._expiration_ms == expiration_ms:
            return False
        self._expiration_ms = expiration_ms
        return True

    def add(self, entry: TimerTaskEntry) -> None:
        # An entry sits in at most one list: unlink it from wherever it is first.
        # (Attributes are read directly here: this is the timer's hottest path.)
        current = entry.list
        if current is not None:
            current.remove(entry)
        task = entry.task
        if task is None or task.timer_task_entry is not entry:  # cancelled
            return
        root = self._root
        tail = root.prev
        entry.next = root
        entry.prev = tail
        entry.list = self
        tail.next = entry
        root.prev = entry
        self._size += 1
        self._counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        if entry.list is not self:
            return
        entry.next.prev = entry.prev
        entry.prev.next = entry.next
        entry.next = None
        entry.prev = None
        entry.list = None
        self._size -= 1
        self._counter.value -= 1

    def flush(self, fn: Callable[[TimerTaskEntry], object]) -> None:
        """Empty the bucket, reset its expiration to -1, then call `fn` on every entry it held.

        The bucket is emptied before any `fn` runs, so `fn` (which may run tasks, and tasks may add
        tasks) always sees a consistent, reusable bucket.
        """
        detached = []
        root = self._root
        entry = root.next
        while entry is not root:
            following = entry.next
            entry.next = None
            entry.prev = None
            entry.list = None
            detached.append(entry)
            entry = following
        root.next = root
        root.prev = root
        self._counter.value -= self._size
        self._size = 0
        self._expiration_ms = -1
        for entry in detached:
            fn(entry)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[TimerTask]:
        """The live tasks in this bucket, oldest first."""
        root = self._root
        entry = root.next
        while entry is not root:
            following = entry.next
            if not entry.cancelled:
                yield entry.task
            entry = following

    def __repr__(self) -> str:
        return (
            f"TimerTaskList(level={self.level}, index={self.index}, "
            f"expiration={self._expiration_ms}, size={self._size})"
        )
