"""The broker's own time on one request: a handler coroutine driven step by step, the steps timed
and the waits between them (a purgatory, the disk, other connections) left out. It stands in for
Kafka's request-handler thread time, which the request_percentage quota measures."""

from __future__ import annotations

import time
import types
from collections.abc import Coroutine
from typing import Any


class HandlerTime:
    __slots__ = ("_spent_ns", "_step_started")

    def __init__(self) -> None:
        self._spent_ns = 0
        self._step_started: int | None = None

    def elapsed_ns(self) -> int:
        """Time spent so far, the running step included (a handler asking about itself)."""
        running = self._step_started
        return self._spent_ns + (time.perf_counter_ns() - running if running is not None else 0)

    @types.coroutine
    def run(self, coro: Coroutine[Any, Any, Any]):
        """Await `coro`, timing each of its steps; what it yields goes to the task unchanged."""
        value: Any = None
        error: BaseException | None = None
        while True:
            self._step_started = time.perf_counter_ns()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                self._spent_ns += time.perf_counter_ns() - self._step_started
                self._step_started = None
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation and the like go into the handler
                value, error = None, exc
