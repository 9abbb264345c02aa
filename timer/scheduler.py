"""KafkaScheduler: a broker's periodic jobs (log flush, checkpoints, retention, ISR expiration,
the cleaner, coordinators' expirations, leader rebalance) as tasks on the SystemTimer, so the
clock that drives the purgatories, real, virtual or manual, drives them too."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from timer.system_timer import SystemTimer
from timer.timer_task import FunctionTimerTask

# An interval at or past this never comes: the job is not scheduled (Kafka's Long.MAX_VALUE ms).
NEVER_MS = 2**62

ErrorHandler = Callable[[str, BaseException], None]


@dataclass(slots=True)
class ScheduledJob:
    """One named job: what it runs, how often, how often it ran."""
    name: str
    job: Callable[[], Any]
    period_ms: int
    runs: int = 0
    task: FunctionTimerTask | None = None  # its next run on the timer
    running: asyncio.Future | None = None  # an asynchronous run not finished yet


class KafkaScheduler:
    """Named periodic jobs on a timer. A job is a function; when it returns an awaitable, the
    next run is scheduled once it has finished, so a job never overlaps itself. A job that raises
    is reported to `on_error` and still runs again."""

    def __init__(self, timer: SystemTimer, on_error: ErrorHandler | None = None) -> None:
        self._timer = timer
        self._on_error = on_error
        self._jobs: dict[str, ScheduledJob] = {}

    def schedule(self, name: str, job: Callable[[], Any], period_ms: int, *,
                 delay_ms: int | None = None) -> None:
        """Run `job` every `period_ms` (the first time after `delay_ms`, else one period);
        a period at or past NEVER_MS schedules nothing. A job of the same name is replaced."""
        self.cancel(name)
        if period_ms >= NEVER_MS:
            return
        entry = self._jobs[name] = ScheduledJob(name, job, max(1, period_ms))
        self._arm(entry, entry.period_ms if delay_ms is None else delay_ms)

    def _arm(self, entry: ScheduledJob, delay_ms: int) -> None:
        entry.task = FunctionTimerTask(max(0, delay_ms), lambda: self._run(entry))
        self._timer.add(entry.task)

    def _run(self, entry: ScheduledJob) -> None:
        if self._jobs.get(entry.name) is not entry:  # cancelled or replaced meanwhile
            return
        entry.task = None
        entry.runs += 1
        try:
            result = entry.job()
        except Exception as exc:
            self._report(entry.name, exc)
            result = None
        if not inspect.isawaitable(result):
            self._arm(entry, entry.period_ms)
            return
        entry.running = asyncio.ensure_future(result)

        def finished(done: asyncio.Future) -> None:
            entry.running = None
            if not done.cancelled() and done.exception() is not None:
                self._report(entry.name, done.exception())
            if self._jobs.get(entry.name) is entry and not done.cancelled():
                self._arm(entry, entry.period_ms)

        entry.running.add_done_callback(finished)

    def _report(self, name: str, exc: BaseException | None) -> None:
        if self._on_error is not None and exc is not None:
            self._on_error(name, exc)

    def cancel(self, name: str) -> None:
        """Stop scheduling `name`; a run in progress finishes (or is cancelled by shutdown)."""
        entry = self._jobs.pop(name, None)
        if entry is not None and entry.task is not None:
            entry.task.cancel()

    def shutdown(self) -> list[asyncio.Future]:
        """Cancel every job, asynchronous runs in progress included; those runs are returned, for
        a caller that waits for them to end. Jobs scheduled afterwards run (a broker started
        again schedules its own again)."""
        running = [e.running for e in self._jobs.values() if e.running is not None]
        for name in list(self._jobs):
            self.cancel(name)
        for future in running:
            future.cancel()
        return running

    def jobs(self) -> list[dict[str, Any]]:
        """Each job's name, period and runs so far (the admin view)."""
        return [{"name": e.name, "period_ms": e.period_ms, "runs": e.runs,
                 "running": e.running is not None} for e in self._jobs.values()]
