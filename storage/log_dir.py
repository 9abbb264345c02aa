"""LogDir: one entry of a broker's `log.dirs` — its checkpoint files, clean-shutdown marker, log
cleaner and injected disk faults; the LogManager owns one per entry (Kafka keeps them per dir too).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import storage
from storage.checkpoint import OffsetCheckpointFile
from storage.disk_faults import DiskFaults
from storage.log_dir_failure_channel import LogDirFailureChannel
from storage.naming import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)

if TYPE_CHECKING:
    from storage.log import Log
    from storage.log_cleaner import LogCleaner


class LogDir:
    def __init__(self, path: Path, now_ms: Callable[[], int],
                 failure_channel: LogDirFailureChannel, disk: DiskFaults | None) -> None:
        self.path = Path(path)
        self.name = str(self.path)  # the key the failure channel and the logs (`Log.log_dir`) use
        self.disk = disk
        self.failure_channel = failure_channel
        self.recovery_points = OffsetCheckpointFile(self.path / RECOVERY_POINT_CHECKPOINT, disk)
        self.log_start_offsets = OffsetCheckpointFile(self.path / LOG_START_OFFSET_CHECKPOINT, disk)
        self.high_watermarks = OffsetCheckpointFile(self.path / HIGH_WATERMARK_CHECKPOINT, disk)
        self.checkpoint_lock = threading.Lock()
        self.had_clean_shutdown = False
        self._now_ms = now_ms
        self._cleaner: LogCleaner | None = None
        self._cleaner_lock = threading.Lock()  # the loop and a cleaning worker may ask first

    @property
    def cleaner(self) -> LogCleaner:
        """The dir's log cleaner, made when first needed: a broker without compacted logs (or
        before its first cleaning pass) never loads the cleaner's code, which start-up then skips."""
        if self._cleaner is None:
            with self._cleaner_lock:
                if self._cleaner is None:
                    self._cleaner = storage.log_cleaner.LogCleaner(
                        self.path, self._now_ms, self.failure_channel, self.disk)
        return self._cleaner

    @property
    def offline(self) -> bool:
        return self.failure_channel.is_offline(self.name)

    @property
    def clean_shutdown_file(self) -> Path:
        return self.path / CLEAN_SHUTDOWN_FILE


class CountedLogs(dict):
    """Logs by topic-partition that keep `counts` (logs per dir, shared by a manager's maps)
    current as they change: placing a new log never walks every log (10,000 partitions)."""

    def __init__(self, counts: Counter[str]) -> None:
        super().__init__()
        self._counts = counts

    def __setitem__(self, key: tuple[str, int], log: Log) -> None:
        if key in self:
            self._counts[self[key].log_dir] -= 1
        super().__setitem__(key, log)
        self._counts[log.log_dir] += 1

    def __delitem__(self, key: tuple[str, int]) -> None:
        self._counts[self[key].log_dir] -= 1
        super().__delitem__(key)

    def pop(self, key: tuple[str, int], *default: object) -> Log:  # type: ignore[override]
        if key not in self:
            if default:
                return default[0]  # type: ignore[return-value]
            raise KeyError(key)
        log = self[key]
        del self[key]
        return log

    def clear(self) -> None:
        for log in self.values():
            self._counts[log.log_dir] -= 1
        super().clear()
