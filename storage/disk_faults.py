"""DiskFaults: a broker's injected disk faults, consulted at every write, fsync and truncation of
its log directories' files: segments (`.log`), indexes, checkpoint files and the cleaner's output,
each fault armed for some of those kinds and for one log dir or all (the control API arms them;
with none armed the calls go straight to os).
"""

from __future__ import annotations

import enum
import errno as errno_codes
import itertools
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.file_sync import fsync_path


class DiskOperation(enum.StrEnum):
    WRITE = "write"
    FSYNC = "fsync"


class FileKind(enum.StrEnum):
    """Which files of a log dir a fault hits."""

    LOG = "log"  # segment files
    INDEX = "index"  # .index, .timeindex, .txnindex
    CHECKPOINT = "checkpoint"  # recovery-point, log-start-offset, high-watermark, cleaner, leader-epoch
    CLEANER = "cleaner"  # the log cleaner's `.cleaned` output


DEFAULT_FILES = frozenset({FileKind.LOG})
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def file_kind(path: Path) -> FileKind | None:
    """The kind of a file the log flusher fsyncs by name (None: a folder, never faulted)."""
    if path.suffix == ".log":
        return FileKind.LOG
    if path.suffix in INDEX_SUFFIXES:
        return FileKind.INDEX
    return None


def resolve_files(files: Iterable[str] | None) -> frozenset[FileKind]:
    """File kinds by name ("all" for every kind); ValueError names an unknown one."""
    if files is None:
        return DEFAULT_FILES
    if isinstance(files, str) or not all(isinstance(f, str) for f in files):
        raise ValueError(f"files must be a list of file kinds, not {files!r}")
    names = list(files)
    if "all" in names:
        return frozenset(FileKind)
    kinds = set()
    for name in names:
        try:
            kinds.add(FileKind(name))
        except ValueError:
            raise ValueError(f"file kind must be one of {', '.join(FileKind)} or all, "
                             f"not {name!r}") from None
    if not kinds:
        raise ValueError("files must name at least one file kind")
    return frozenset(kinds)


@dataclass(slots=True)
class DiskFault:
    """One injected disk failure: an operation failing with errno on the kinds of file it hits."""
    id: int
    operation: DiskOperation
    errno: int
    after_bytes: int | None = None  # write: bytes still written for real before it fails
    after_ops: int | None = None  # calls that still succeed before it fails
    hits: int = 0  # calls it failed
    files: frozenset[FileKind] = DEFAULT_FILES  # the kinds of file it hits
    log_dir: str | None = None  # the log dir it hits (None: every dir of the broker)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as the control API lists it."""
        return {"id": self.id, "operation": self.operation.value,
                "errno": errno_codes.errorcode.get(self.errno, str(self.errno)),
                "after_bytes": self.after_bytes, "after_ops": self.after_ops, "hits": self.hits,
                "files": sorted(self.files),
                **({"log_dir": self.log_dir} if self.log_dir is not None else {})}


def resolve_errno(value: int | str) -> int:
    """An errno by name (ENOSPC, EIO, ...) or number; ValueError for one the OS does not know."""
    code = getattr(errno_codes, value.upper(), None) if isinstance(value, str) else value
    if not isinstance(code, int) or isinstance(code, bool) or code not in errno_codes.errorcode:
        raise ValueError(f"errno must be a name such as ENOSPC or EIO, not {value!r}")
    return code


def _count(value: int | None, what: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{what} must be a non-negative integer or null, not {value!r}")
    return value


def same_dir(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


class DiskFaults:
    """The armed faults of one broker's log directories. An armed fault stays until cleared, as a
    full or failing disk stays so: once it fires, every later call of its kind fails too. A log
    dir's files go through `for_dir(path)`, a view that sees the faults armed for that dir."""

    def __init__(self, ids: Iterator[int] | None = None) -> None:
        self._faults: dict[int, DiskFault] = {}
        self._ids = ids if ids is not None else itertools.count(1)
        # The log flusher's thread fsyncs too: a fault's counters move under this lock.
        self._lock = threading.Lock()
        self._log_dir: str | None = None  # a view's dir; None: every fault applies

    def for_dir(self, log_dir: str) -> DiskFaults:
        """The faults as log dir `log_dir`'s files meet them (they share armed faults and ids)."""
        view = DiskFaults.__new__(DiskFaults)
        view._faults, view._ids, view._lock = self._faults, self._ids, self._lock
        view._log_dir = log_dir
        return view

    def _armed(self) -> list[DiskFault]:
        if self._log_dir is None:
            return list(self._faults.values())
        return [f for f in self._faults.values()
                if f.log_dir is None or same_dir(f.log_dir, self._log_dir)]

    def add(
        self, operation: str, errno: int | str, *, after_bytes: int | None = None,
        after_ops: int | None = None, files: Iterable[str] | None = None,
        log_dir: str | None = None,
    ) -> DiskFault:
        """Arm a fault on the given kinds of file (segment files when None) of one log dir (every
        dir when None); ValueError names what is wrong with the spec."""
        try:
            op = DiskOperation(operation)
        except ValueError:
            raise ValueError(f"operation must be write or fsync, not {operation!r}") from None
        if after_bytes is not None and op is not DiskOperation.WRITE:
            raise ValueError("after_bytes applies to write faults only; use after_ops")
        fault = DiskFault(next(self._ids), op, resolve_errno(errno),
                          _count(after_bytes, "after_bytes"), _count(after_ops, "after_ops"),
                          files=resolve_files(files), log_dir=log_dir)
        self._faults[fault.id] = fault
        return fault

    def list(self) -> list[DiskFault]:
        return list(self._faults.values())

    def clear(self, fault_id: int | None = None) -> int:
        """Disarm one fault (or all); returns how many."""
        gone = [i for i in self._faults if fault_id is None or i == fault_id]
        for i in gone:
            del self._faults[i]
        return len(gone)

    # -- the file-I/O calls of the log dir (the loop's, the flusher's and workers' threads) ------------

    def write(self, fd: int, data: memoryview | bytes, kind: FileKind = FileKind.LOG) -> int:
        """os.write, unless a write fault fires: then the part it still allows is written for real
        (a partial write, as on a disk that fills up mid-write) and OSError is raised."""
        with self._lock:
            for fault in self._armed():
                if fault.operation is DiskOperation.WRITE and kind in fault.files:
                    allowed = self._allowance(fault, len(data))
                    if allowed < len(data):
                        if allowed:
                            os.write(fd, data[:allowed])
                        self._fail(fault)
        return os.write(fd, data)

    def write_all(self, fd: int, data: memoryview | bytes, kind: FileKind) -> None:
        view, written = memoryview(data), 0
        while written < len(view):
            written += self.write(fd, view[written:], kind)

    def fsync(self, fd: int, kind: FileKind = FileKind.LOG) -> None:
        self.check_fsync(kind)
        os.fsync(fd)

    def fsync_path(self, path: Path, kind: FileKind | None = FileKind.LOG) -> None:
        """fsync a file by name, as the log flusher's thread does (a folder: kind None)."""
        if kind is not None:
            self.check_fsync(kind)
        fsync_path(path)

    def check_fsync(self, kind: FileKind) -> None:
        """Raise as an armed fsync fault of `kind` fires (a group commit's files meet it here)."""
        with self._lock:
            for fault in self._armed():
                if (fault.operation is DiskOperation.FSYNC and kind in fault.files
                        and self._allowance(fault, 1) < 1):
                    self._fail(fault)

    def truncate(self, fd: int, size: int, kind: FileKind = FileKind.LOG) -> None:
        """os.ftruncate, which a fired write fault fails too, except ENOSPC: shrinking a file on
        a full disk frees space, a device answering EIO refuses that write as well."""
        with self._lock:
            for fault in self._armed():
                if (fault.operation is DiskOperation.WRITE and kind in fault.files and fault.hits
                        and fault.errno != errno_codes.ENOSPC):
                    self._fail(fault)
        os.ftruncate(fd, size)

    @staticmethod
    def _allowance(fault: DiskFault, wanted: int) -> int:
        """How much of `wanted` (bytes, or 1 for an op) the fault still lets through; uses it up."""
        if fault.after_ops is None and fault.after_bytes is None:
            return 0  # armed without a delay: it fails now
        if fault.after_ops is not None:
            if fault.after_ops == 0:
                return 0
            fault.after_ops -= 1
        allowed = wanted
        if fault.after_bytes is not None:
            allowed = min(wanted, fault.after_bytes)
            fault.after_bytes -= allowed
        return allowed

    @staticmethod
    def _fail(fault: DiskFault) -> None:
        fault.hits += 1
        raise OSError(fault.errno, f"{os.strerror(fault.errno)} (injected disk fault {fault.id})")
