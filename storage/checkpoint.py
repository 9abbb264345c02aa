"""Kafka-style offset checkpoint files ("0", a count, then "topic partition offset" lines).

Writes are atomic: a temp file is written and fsynced, then renamed over the old one, then the folder
is fsynced, so a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError
from storage.disk_faults import DiskFaults, FileKind
from storage.file_sync import can_sync_file_system, fsync_dir, fsync_path, sync_file_system
from storage.naming import TEMP_SUFFIX

__all__ = ["fsync_dir", "fsync_path"]  # re-exported: their callers import them from here

CHECKPOINT_VERSION = 0


def malformed_checkpoint(path: Path, why: str) -> KafkaError:
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"malformed checkpoint {path}: {why}")


def checkpoint_text(rows: Sequence[str]) -> str:
    """Kafka's checkpoint layout: a version line, a count line, then one line per entry."""
    return "\n".join([str(CHECKPOINT_VERSION), str(len(rows)), *rows]) + "\n"


def write_checkpoint(path: Path, rows: Sequence[str], disk: DiskFaults | None = None) -> None:
    write_text_atomically(path, checkpoint_text(rows), disk)


def read_checkpoint(
    path: Path, fields: int, problems: list[str] | None = None
) -> list[list[str]] | None:
    """The entries of a checkpoint file, each split into `fields` words; None when there is no file.

    Strict by default: anything malformed raises KAFKA_STORAGE_ERROR. Given a `problems` list (the
    broker's start-up), each malformed part is described there and skipped instead: a file with a
    bad version or count line gives no entries, a line without `fields` words is left out.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        if problems is None:
            raise malformed_checkpoint(path, str(exc)) from None
        problems.append(f"malformed checkpoint {path}: {exc}; ignored")
        return []

    def malformed(why: str) -> None:
        if problems is None:
            raise malformed_checkpoint(path, why)
        problems.append(f"malformed checkpoint {path}: {why}; skipped")

    lines = text.splitlines()
    if len(lines) < 2:
        malformed("missing version or count line")
        return []
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        malformed(f"unknown version {lines[0]!r}")
        return []
    try:
        count = int(lines[1])
    except ValueError:
        malformed(f"bad count {lines[1]!r}")
        count = -1
    rows = [line.split() for line in lines[2:] if line.strip()]
    if count != -1 and len(rows) != count:
        malformed(f"expected {count} entries, found {len(rows)}")
    kept = []
    for row in rows:
        if len(row) != fields:
            malformed(f"bad line {' '.join(row)!r}")
        else:
            kept.append(row)
    return kept


class OffsetCheckpointFile:
    """One checkpoint file mapping (topic, partition) to an offset."""

    def __init__(self, path: Path, disk: DiskFaults | None = None) -> None:
        self.path = Path(path)
        self.disk = disk  # its log dir's injected faults (checkpoint kind)
        self._lock = threading.Lock()  # writers in two threads would share the temp file

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        rows = [f"{t} {p} {offset}" for (t, p), offset in offsets.items()]
        with self._lock:
            write_checkpoint(self.path, rows, self.disk)

    def read(self, problems: list[str] | None = None) -> dict[tuple[str, int], int]:
        """The stored offsets; {} when the file does not exist. With `problems`, malformed lines
        are described there and skipped (see read_checkpoint) rather than raising."""
        offsets: dict[tuple[str, int], int] = {}
        for topic, partition, offset in read_checkpoint(self.path, 3, problems) or []:
            try:
                offsets[(topic, int(partition))] = int(offset)
            except ValueError:
                why = f"bad line {topic} {partition} {offset}"
                if problems is None:
                    raise malformed_checkpoint(self.path, why) from None
                problems.append(f"malformed checkpoint {self.path}: {why!r}; skipped")
        return offsets


def write_text_atomically(path: Path, text: str, disk: DiskFaults | None = None) -> None:
    """Write `text` to `path` so that a crash leaves the old file or the new one, never a torn one
    (through `disk`'s injected checkpoint faults when given)."""
    tmp = _write_temp(path, text, disk, sync=True)
    os.replace(tmp, path)
    fsync_dir(path.parent)


# From this many files on, write_texts_atomically syncs the file system twice rather than each
# file and folder: on this project's ext4 VM a 64-file group went from ~1.4 to ~0.3 ms a file.
GROUP_SYNC_MIN = 8


def write_texts_atomically(
    files: Sequence[tuple[Path, str, DiskFaults | None]], file_systems: Sequence[Path],
    failed: Callable[[int, OSError], None],
) -> bool:
    """write_text_atomically for many files at once, as a group commit: every temp file written,
    one syncfs of each of `file_systems` (folders on the file systems holding the files), every
    rename, one syncfs again. Either way a crash leaves each file old or new, never torn, and a
    file's injected checkpoint faults (its `disk`) fire. A file's OSError goes to
    `failed(i, exc)` (which may raise) and leaves that file out. True when the file systems were
    synced (their folders' new entries are durable too)."""
    if len(files) < GROUP_SYNC_MIN or not can_sync_file_system():
        for i, (path, text, disk) in enumerate(files):
            try:
                write_text_atomically(path, text, disk)
            except OSError as exc:
                failed(i, exc)
        return False
    written: list[tuple[int, Path, Path]] = []
    for i, (path, text, disk) in enumerate(files):
        try:
            tmp = _write_temp(path, text, disk, sync=False)
            if disk is not None:
                disk.check_fsync(FileKind.CHECKPOINT)  # its fsync is the syncfs below
            written.append((i, tmp, path))
        except OSError as exc:
            failed(i, exc)
    for folder in file_systems:
        sync_file_system(folder)
    for i, tmp, path in written:
        try:
            os.replace(tmp, path)
        except OSError as exc:
            failed(i, exc)
    for folder in file_systems:
        sync_file_system(folder)
    return True


def _write_temp(path: Path, text: str, disk: DiskFaults | None, *, sync: bool) -> Path:
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if disk is None:
            view, written = memoryview(text.encode("utf-8")), 0
            while written < len(view):
                written += os.write(fd, view[written:])
            if sync:
                os.fsync(fd)
        else:
            disk.write_all(fd, text.encode("utf-8"), FileKind.CHECKPOINT)
            if sync:
                disk.fsync(fd, FileKind.CHECKPOINT)
    finally:
        os.close(fd)
    return tmp
