"""FileHandleCache: a bounded LRU of open segment file descriptors shared by a LogManager's logs, so
that thousands of partitions fit in the process's descriptor limit (segments reopen on next use).
"""

from __future__ import annotations

import errno
import os
from collections import OrderedDict
from pathlib import Path

DEFAULT_MAX_OPEN_FILES = 256


class CachedFile:
    """One segment file, opened through its cache when used. A descriptor it returns is valid
    only until the cache is used again (another file may evict it): use it at once, never keep it
    across a yield or an await."""

    __slots__ = ("path", "flags", "cache")

    def __init__(self, cache: FileHandleCache, path: Path, flags: int) -> None:
        self.path = path
        self.flags = flags
        self.cache = cache

    def fd(self) -> int:
        return self.cache.fd(self)

    def close(self) -> None:
        """Close the descriptor if open; the next fd() reopens the file."""
        self.cache.close(self)

    @property
    def is_open(self) -> bool:
        return self in self.cache


class FileHandleCache:
    """At most `max_open` descriptors open at once, least recently used closed first.

    Used only from the thread that owns the logs (the event loop): no locks. Work done in other
    threads (fsyncs, the cleaner's reads) opens descriptors of its own."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN_FILES) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, not {max_open}")
        self.max_open = max_open
        self._open: OrderedDict[CachedFile, int] = OrderedDict()
        self.opens = 0  # descriptors opened so far (tests and metrics read it)
        self.peak = 0  # the most open at once

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, file: object) -> bool:
        return file in self._open

    def file(self, path: Path, flags: int) -> CachedFile:
        return CachedFile(self, path, flags)

    def fd(self, file: CachedFile) -> int:
        fd = self._open.get(file)
        if fd is not None:
            self._open.move_to_end(file)
            return fd
        while len(self._open) >= self.max_open:
            _, evicted = self._open.popitem(last=False)
            os.close(evicted)
        while True:
            try:
                fd = os.open(file.path, file.flags, 0o644)
                break
            except OSError as exc:
                # Out of descriptors (sockets took them): give one of ours back and try again.
                if exc.errno not in (errno.EMFILE, errno.ENFILE) or not self._open:
                    raise
                os.close(self._open.popitem(last=False)[1])
        self._open[file] = fd
        self.opens += 1
        self.peak = max(self.peak, len(self._open))
        return fd

    def close(self, file: CachedFile) -> None:
        fd = self._open.pop(file, None)
        if fd is not None:
            os.close(fd)

    def close_all(self) -> None:
        while self._open:
            os.close(self._open.popitem()[1])
