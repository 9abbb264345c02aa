"""fsync by name: a file or a folder (to make a rename or a file creation in it durable), and
syncfs: a whole file system's writes made durable in one call."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make a rename or file creation in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: Path) -> None:
    """fsync a file or folder by name, from any thread; one deleted meanwhile needs nothing."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> Callable[[int], None] | None:
    """syncfs(2) on a descriptor, raising OSError; None where the call does not exist."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only where syncfs(2) exists, once

    try:
        call = ctypes.CDLL(None, use_errno=True).syncfs  # a CDLL call releases the GIL
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int]

    def syncfs(fd: int) -> None:
        if call(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))

    return syncfs


def can_sync_file_system() -> bool:
    return _syncfs() is not None


def sync_file_system(path: Path) -> None:
    """syncfs(2) on the file system holding `path`: every write to it so far (data, new files,
    renames) durable at once. Two of them replace two fsyncs per file for a group of files."""
    syncfs = _syncfs()
    if syncfs is None:
        raise OSError(f"syncfs is not available here ({sys.platform})")
    fd = os.open(path, os.O_RDONLY)
    try:
        syncfs(fd)
    finally:
        os.close(fd)
