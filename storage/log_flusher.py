"""LogFlusher: the durability work of a LogManager's logs (fsyncs, checkpoint and snapshot writes) run
in submission order on one worker thread, so that the thread owning the logs never waits on the disk.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

Job = Callable[[], None]


def run_now(job: Job) -> None:
    """A `submit` for callers without a flusher: the job runs on the caller's thread."""
    job()


class LogFlusher:
    """One worker thread (Kafka's scheduler for flush-log and its kin): jobs run one after the
    other, in the order submitted, so file operations on one log keep their order.

    Jobs wait in a queue that the thread empties in one run: a burst of submits (thousands of
    new logs' checkpoints) costs an append each, not a future and a thread wake-up each.
    With `threaded=False` every job runs at once on the caller's thread (tools, unit tests). A
    job's exception goes to `on_error` (the broker logs it) or, without one, is raised by drain().
    """

    def __init__(
        self, *, threaded: bool = True, on_error: Callable[[BaseException], None] | None = None
    ) -> None:
        self.threaded = threaded
        self.on_error = on_error
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._ran = threading.Condition(self._lock)  # notified as jobs finish
        self._queue: deque[Job] = deque()
        self._running: Future[None] | None = None  # the thread's run emptying the queue
        self._submitted = self._finished = 0  # jobs so far: drain() waits for its count only
        self._errors: list[BaseException] = []  # without on_error: raised by the next drain()

    def submit(self, job: Job) -> None:
        if not self.threaded:
            job()
            return
        with self._lock:
            self._queue.append(job)
            self._submitted += 1
            if self._running is not None:
                return  # the run going on takes it
            if self._executor is None:  # created on first use: again after close()
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="log-flusher")
            self._running = self._executor.submit(self._run_queued)

    def _run_queued(self) -> None:
        job: Job | None = None
        while True:
            with self._lock:
                if job is not None:
                    self._finished += 1
                    self._ran.notify_all()
                if not self._queue:
                    self._running = None
                    return
                job = self._queue.popleft()
            try:
                job()
            except Exception as exc:
                if self.on_error is None:
                    self._errors.append(exc)
                else:
                    self.on_error(exc)

    def drain(self) -> None:
        """Block until every job submitted so far has run (off the event loop, or at shutdown)."""
        with self._lock:
            target = self._submitted
            while self._finished < target:  # not later submits: a busy log never starves this
                self._ran.wait()
        if self._errors:
            error, self._errors = self._errors[0], []
            raise error

    def close(self) -> None:
        self.drain()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
