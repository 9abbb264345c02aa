"""TimerTask: something to run once after a delay, and FunctionTimerTask for a plain callable."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol


class TaskEntry(Protocol):
    """The place of a task in a bucket (timer_task_list.TimerTaskEntry); all a task needs of it is
    to be unlinked, so this module does not depend on the bucket's."""

    def remove(self) -> None: ...


class TimerTask(ABC):
    """A task the timer runs once `delay_ms` after it was added, unless cancelled first.

    The task knows the entry that places it in a bucket, so cancelling is an O(1) unlink.
    `run()` is called inline by whoever advances the timer, so it must be quick and must not block.
    """

    __slots__ = ("delay_ms", "timer_task_entry")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        # The entry placing this task in a bucket; read directly on the timer's hot paths.
        self.timer_task_entry: TaskEntry | None = None

    @abstractmethod
    def run(self) -> None: ...

    def cancel(self) -> None:
        entry = self.timer_task_entry
        if entry is not None:
            entry.remove()
        self.timer_task_entry = None

    def set_timer_task_entry(self, entry: TaskEntry | None) -> None:
        # A task lives in at most one bucket: a newer entry (the task added again) supersedes the
        # older one, which is unlinked so it can never run the task a second time.
        old = self.timer_task_entry
        if old is not None and old is not entry:
            old.remove()
        self.timer_task_entry = entry


class FunctionTimerTask(TimerTask):
    """A timer task that calls `fn()` when it expires."""

    __slots__ = ("fn",)

    def __init__(self, delay_ms: int, fn: Callable[[], object]) -> None:
        super().__init__(delay_ms)
        self.fn = fn

    def run(self) -> None:
        self.fn()
