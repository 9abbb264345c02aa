"""LogFlusher: the durability work of a LogManager's logs (fsyncs, checkpoint and snapshot writes) run
in submission order on one worker thread, so that the thread owning the logs never waits on the disk.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

Job = Callable[[], None]


def run_now(job: Job) -> None:
    """A `submit` for callers without a flusher: the job runs on the caller's thread."""
    job()


class LogFlusher:
    """One worker thread (Kafka's scheduler for flush-log and its kin): jobs run one after the
    other, in the order submitted, so file operations on one log keep their order.

    With `threaded=False` every job runs at once on the caller's thread (tools, unit tests). A
    job's exception goes to `on_error` (the broker logs it) or, without one, is raised by drain().
    """

    def __init__(
        self, *, threaded: bool = True, on_error: Callable[[BaseException], None] | None = None
    ) -> None:
        self.threaded = threaded
        self.on_error = on_error
        self._executor: ThreadPoolExecutor | None = None
        self._last: Future[None] | None = None

    def submit(self, job: Job) -> None:
        if not self.threaded:
            job()
            return
        if self._executor is None:  # created on first use: again after close()
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="log-flusher")
        self._last = self._executor.submit(self._run, job)

    def _run(self, job: Job) -> None:
        try:
            job()
        except Exception as exc:
            if self.on_error is None:
                raise
            self.on_error(exc)

    def drain(self) -> None:
        """Block until every job submitted so far has run (off the event loop, or at shutdown)."""
        last = self._last
        if last is not None:
            last.result()  # one thread, in order: the last job done means all are

    def close(self) -> None:
        self.drain()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
