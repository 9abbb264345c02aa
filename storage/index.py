"""Base class for the sparse segment indexes: fixed-size big-endian entries, binary search, file I/O.

Entries live in one bytearray (a few bytes each, no Python object per entry). The file holds the same
bytes; appends are written at flush, truncation cuts the file at once so it never claims dropped entries.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import ClassVar

from storage.disk_faults import DiskFaults, FileKind
from storage.naming import as_path


class Index:
    """Sorted fixed-size entries whose first field is the search key."""

    ENTRY: ClassVar[struct.Struct]
    KEY: ClassVar[struct.Struct]  # the leading field of ENTRY, unpacked alone during the search

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *,
                 fresh: bool = False) -> None:
        """`fresh`: the segment is new in a folder made for it, so no file to read."""
        self.path = as_path(path)
        self.base_offset = base_offset
        self.entry_size = self.ENTRY.size
        self.max_entries = max(max_index_size // self.entry_size, 0)
        self._buf = bytearray()
        self.existed = False
        if not fresh:
            try:
                self._buf = bytearray(self.path.read_bytes())
                self.existed = True
            except FileNotFoundError:
                pass
        self._persisted = len(self._buf)  # bytes of _buf already in the file
        # The log dir's injected faults (index kind); its segment sets it.
        self.disk: DiskFaults | None = None

    @property
    def entries(self) -> int:
        return len(self._buf) // self.entry_size

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return len(self._buf)

    def entry(self, i: int) -> tuple[int, ...]:
        return self.ENTRY.unpack_from(self._buf, i * self.entry_size)

    def _largest_lower_bound(self, target: int) -> int:
        """Index of the last entry whose key <= target, or -1 when there is none."""
        buf, size, unpack = self._buf, self.entry_size, self.KEY.unpack_from
        lo, hi = 0, self.entries - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * size)[0] <= target:
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return found

    def _append_entry(self, *fields: int) -> None:
        self._buf += self.ENTRY.pack(*fields)

    def truncate_entries(self, count: int) -> None:
        """Keep only the first `count` entries, in memory and in the file."""
        new_len = max(count, 0) * self.entry_size
        if new_len >= len(self._buf):
            return
        del self._buf[new_len:]
        if self._persisted > new_len:
            if self.path.exists():
                os.truncate(self.path, new_len)
            self._persisted = new_len

    def reset(self) -> None:
        """Drop every entry and empty the file (before a rebuild)."""
        self._buf = bytearray()
        self.path.write_bytes(b"")
        self._persisted = 0

    def well_formed(self) -> bool:
        """Whole entries only; subclasses add ordering checks."""
        return len(self._buf) % self.entry_size == 0

    def flush(self) -> None:
        """Write entries appended since the last flush and fsync the file."""
        if self._persisted == len(self._buf) and self.path.exists():
            return
        # An empty index lost in a crash is rebuilt on load: no fsync for it.
        self._write_pending(sync=bool(self._buf))

    def write_appended(self) -> bool:
        """flush() without the fsync (the caller has it done elsewhere); True when the file changed."""
        if self._persisted == len(self._buf) and self.path.exists():
            return False
        self._write_pending(sync=False)
        return True

    def _write_pending(self, *, sync: bool) -> None:
        pending = bytes(self._buf[self._persisted :])  # a copy: the owner may append meanwhile
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if self.disk is None:
                view, written = memoryview(pending), 0
                while written < len(view):
                    written += os.write(fd, view[written:])
                if sync:
                    os.fsync(fd)
            else:
                self.disk.write_all(fd, pending, FileKind.INDEX)
                if sync:
                    self.disk.fsync(fd, FileKind.INDEX)
        finally:
            os.close(fd)
        self._persisted += len(pending)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._buf = bytearray()
        self._persisted = 0
