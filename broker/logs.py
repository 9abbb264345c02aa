"""The broker's loggers: structlog's, loaded on the first line logged, or held back while
`kafka-sim run` starts (importing structlog is a tenth of its start-up) and logged once it serves."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

# The key a held line's wall time travels under to the processor that stamps it
# (broker/server/log_setup.py): structlog's TimeStamper would stamp the time of the release.
HELD_AT = "_held_at"

# A held line: (logger, method, event, key-values). A tuple, not a dataclass: this module loads
# on every start-up, and making a dataclass costs more than all the lines it would ever hold.
HeldLine = tuple["Logger", str, str, dict[str, Any]]


class _Hold:
    """The lines logged while start-up holds them. Process-wide, as structlog's configuration is:
    the loggers are module-level. Locked because the flusher and journal threads log too."""

    def __init__(self) -> None:
        self.lines: list[HeldLine] | None = None  # None: lines go straight to structlog
        self.configure: Callable[[], None] | None = None
        self.lock = threading.Lock()


_hold = _Hold()


class Logger:
    """What `structlog.get_logger(name)` gave the broker's modules, with the methods they call."""

    __slots__ = ("_name", "_target")

    def __init__(self, name: str) -> None:
        self._name = name
        self._target: Any = None  # structlog's lazy proxy: it follows structlog's configuration

    # Properties handing out structlog's own method (or, while held, a recorder of the line):
    # `log.debug("request", ...)` runs per request and, at info level, costs no more than it did.
    debug = property(lambda self: self._method("debug"))
    info = property(lambda self: self._method("info"))
    warning = property(lambda self: self._method("warning"))
    error = property(lambda self: self._method("error"))
    exception = property(lambda self: self._method("exception"))

    def _method(self, method: str) -> Callable[..., None]:
        if _hold.lines is None:
            return getattr(self._target or self._structlog(), method)
        return partial(self._hold_or_log, method)

    def _hold_or_log(self, method: str, event: str, **kw: Any) -> None:
        if not _held(self, method, event, kw):
            getattr(self._target or self._structlog(), method)(event, **kw)

    def _structlog(self) -> Any:
        import structlog

        self._target = structlog.get_logger(self._name)
        return self._target


def get_logger(name: str) -> Logger:
    return Logger(name)


def _held(logger: Logger, method: str, event: str, kw: dict[str, Any]) -> bool:
    with _hold.lock:
        if _hold.lines is None:  # released meanwhile
            return False
        kw[HELD_AT] = time.time()
        # The exception being handled now: at the release there is none, or another one.
        if (method == "exception" and "exc_info" not in kw) or kw.get("exc_info") is True:
            kw["exc_info"] = sys.exc_info()
        _hold.lines.append((logger, method, event, kw))
        return True


def hold_until_serving(configure: Callable[[], None]) -> None:
    """Record every line instead of logging it, until `release`, which first calls `configure`
    (structlog's set-up: the first import of structlog)."""
    with _hold.lock:
        if _hold.lines is None:
            _hold.lines = []
        _hold.configure = configure


def release() -> None:
    """Configure structlog and log the held lines in order, each with the time it was logged at;
    from now on lines go straight through. Does nothing when nothing is held."""
    with _hold.lock:
        lines, configure = _hold.lines, _hold.configure
        if lines is None:
            return
        _hold.lines = _hold.configure = None
        try:
            if configure is not None:
                configure()
        finally:  # a set-up that failed still leaves structlog's defaults to log with
            for logger, method, event, kw in lines:
                getattr(logger._target or logger._structlog(), method)(event, **kw)
