"""A running count on stderr for long runs: once a second while records flow, when stderr is a
terminal (rewriting one line) or when asked (`--progress`: one line each)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO, verb: str, *, enabled: bool,
                 clock: Callable[[], float] = time.monotonic, interval_s: float = 1.0) -> None:
        self._stream = stream
        self._verb = verb
        self._enabled = enabled
        self._clock = clock
        self._interval_s = interval_s
        self._tty = enabled and stream.isatty()
        self._started = clock()
        self._next = self._started + interval_s
        self.count = 0

    @staticmethod
    def wanted(asked: bool, stderr: TextIO, typed_input: TextIO | None = None) -> bool:
        """Asked for (`--progress`), or a person watches stderr on a terminal, unless they are
        typing the input there themselves (they need no count of their own lines)."""
        return asked or (stderr.isatty() and not (typed_input is not None
                                                  and typed_input.isatty()))

    def add(self, n: int = 1) -> None:
        self.count += n
        self.tick()

    def tick(self) -> None:
        """Show the count if a second has gone by since it was last shown."""
        if not self._enabled:
            return
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self._interval_s
        self._show(now)

    def done(self) -> None:
        """The final count (a terminal's rewritten line then ends, so what follows starts on its
        own)."""
        if self._enabled:
            self._show(self._clock())
            if self._tty:
                self._stream.write("\n")
                self._stream.flush()

    def _show(self, now: float) -> None:
        rate = self.count / max(now - self._started, 1e-3)
        line = f"{self._verb} {self.count:,} records ({rate:,.0f}/s)"
        self._stream.write(f"\r{line}\x1b[K" if self._tty else line + "\n")
        self._stream.flush()
