"""LogManager: every partition log in one data directory, plus its checkpoint files, retention and
compaction.

Checkpoints (recovery point, log start offset, high watermark) sit at the top of the data directory;
a `.kafka_cleanshutdown` marker written at shutdown lets the next start skip the deep scan. The logs
share one bounded cache of segment descriptors and one flusher (the worker thread for their fsyncs).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Generator
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError
from storage.checkpoint import OffsetCheckpointFile, fsync_dir, fsync_path
from storage.disk_faults import DiskFaults
from storage.file_handles import DEFAULT_MAX_OPEN_FILES, FileHandleCache
from storage.log import Log
from storage.log_cleaner import LogCleaner
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import KafkaStorageError, LogDirFailureChannel
from storage.log_flusher import LogFlusher
from storage.naming import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    log_dir_name,
    parse_log_dir_name,
)
from storage.partition_metadata import write_partition_metadata
from storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

TopicPartition = tuple[str, int]


class LogManager:
    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig,
        *,
        now_ms: Callable[[], int],
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        disk: DiskFaults | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        max_open_files: int = DEFAULT_MAX_OPEN_FILES,
        flusher: LogFlusher | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.disk = disk  # what this dir's segments write, fsync and truncate through
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.files = FileHandleCache(max_open_files)
        # Without one given, durability work runs on the caller's thread (tools and unit tests).
        self.flusher = flusher or LogFlusher(threaded=False)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.default_config = default_config
        self._now_ms = now_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._recovery_points = OffsetCheckpointFile(self.data_dir / RECOVERY_POINT_CHECKPOINT, disk)
        self._log_start_offsets = OffsetCheckpointFile(self.data_dir / LOG_START_OFFSET_CHECKPOINT,
                                                       disk)
        self._high_watermarks = OffsetCheckpointFile(self.data_dir / HIGH_WATERMARK_CHECKPOINT, disk)
        self._checkpoint_lock = threading.Lock()
        self.had_clean_shutdown = False
        self.load_problems: list[str] = []  # what load() skipped, for the broker to warn about
        self.cleaner = LogCleaner(self.data_dir, now_ms, self.failure_channel, disk)

    def load(self) -> None:
        """Open every `topic-N` folder; recover from the checkpoints unless the last stop was clean.
        Runs in any one thread (the broker uses a worker): nothing else uses the manager yet. An
        I/O error takes the dir offline (KafkaStorageError), as Kafka's loadLogs does."""
        try:
            self._load()
        except OSError as exc:
            raise self.failure_channel.storage_error(str(self.data_dir), "loading logs", exc) \
                from exc

    def _load(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = marker.exists()
        # A row that cannot be parsed back is skipped (its log recovers from its start, its high
        # watermark is caught up again) rather than keep the broker from starting.
        self.load_problems = []
        recovery_points = self._recovery_points.read(self.load_problems)
        log_starts = self._log_start_offsets.read(self.load_problems)
        high_watermarks = self._high_watermarks.read(self.load_problems)
        for path in sorted(self.data_dir.iterdir()):
            key = parse_log_dir_name(path.name) if path.is_dir() else None
            if key is None or key in self._logs:
                continue
            log = Log.open(
                path,
                self.config_for(key[0]),
                now_ms=self._now_ms,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=log_starts.get(key),
                clean_shutdown=self.had_clean_shutdown,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                disk=self.disk,
                failure_channel=self.failure_channel,
                files=self.files,
                flusher=self.flusher,
            )
            log.high_watermark = high_watermarks.get(key, 0)
            self._logs[key] = log
        # From here on a crash is unclean again; the marker comes back only with shutdown().
        marker.unlink(missing_ok=True)

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                   topic_id: uuid.UUID | None = None) -> Log:
        """Open (creating if needed) the log for topic-partition; an existing one is returned as is.
        A new one with a `topic_id` gets its partition.metadata with the folder's fsync."""
        if config is not None:
            self._topic_configs[topic] = config
        log = self._logs.get((topic, partition))
        if log is None:
            directory = self.data_dir / log_dir_name(topic, partition)
            if parse_log_dir_name(directory.name) != (topic, partition):
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"bad topic name {topic!r}")
            self.failure_channel.check_online(str(self.data_dir), f"creating log {directory.name}")
            try:
                log = Log.open(directory, self.config_for(topic), now_ms=self._now_ms,
                               producer_id_expiration_ms=self.producer_id_expiration_ms,
                               disk=self.disk, failure_channel=self.failure_channel,
                               files=self.files, flusher=self.flusher)
            except OSError as exc:  # its folder, segment or index files: the dir goes offline
                raise self.failure_channel.storage_error(
                    str(self.data_dir), f"creating log {directory.name}", exc) from exc

            def make_durable() -> None:  # the new folder and its first segment file
                try:
                    if topic_id is not None:
                        write_partition_metadata(directory, topic_id)
                    fsync_path(directory)
                    fsync_path(self.data_dir)
                except OSError as exc:
                    if created.deleted:  # deleted (its folder removed) before this ran: nothing lost
                        return
                    raise self.failure_channel.storage_error(
                        str(self.data_dir), f"creating log {directory.name}", exc) from exc

            created = log
            self.flusher.submit(make_durable)
            self._logs[(topic, partition)] = log
        return log

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and remove its folder; False when there was none."""
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        log.delete()
        self.cleaner.forget((topic, partition), self.flusher.submit)
        if not any(t == topic for t, _ in self._logs):
            self._topic_configs.pop(topic, None)
        return True

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (t, _), log in self._logs.items():
            if t == topic:
                log.update_config(config)

    def checkpoint(self) -> None:
        """Write the recovery point, log start offset and high watermark files (each atomically)."""
        self.write_checkpoints(self.checkpoint_snapshot())

    def checkpoint_snapshot(self) -> list[tuple[OffsetCheckpointFile, dict[TopicPartition, int]]]:
        """The offsets to checkpoint, taken now (cheap); `write_checkpoints` may run elsewhere."""
        logs = self._logs.items()
        return [
            (self._recovery_points, {k: log.recovery_point for k, log in logs}),
            (self._log_start_offsets, {k: log.log_start_offset for k, log in logs}),
            (self._high_watermarks, {k: log.high_watermark for k, log in logs}),
        ]

    def write_checkpoints(
        self, snapshot: list[tuple[OffsetCheckpointFile, dict[TopicPartition, int]]]
    ) -> None:
        """Write a snapshot's files; safe to call from a worker thread (writes are serialised)."""
        if self.failure_channel.is_offline(str(self.data_dir)):
            return  # an offline dir is never written again (its logs are already forgotten)
        with self._checkpoint_lock:
            try:
                for file, offsets in snapshot:
                    file.write(offsets)
            except OSError as exc:  # as a failed log write: the dir goes offline
                raise self.failure_channel.storage_error(
                    str(self.data_dir), "writing checkpoint files", exc) from exc

    def cleanup(self) -> int:
        """Retention on every log; returns the number of segments deleted."""
        return sum(log.delete_old_segments() for log in self._logs.values())

    def clean_logs(self, *, force: bool = False) -> int:
        """Compaction (storage/log_cleaner.py) on every compacted log; returns how many were cleaned."""
        return self.cleaner.clean_logs(self._logs, force=force)

    def clean_logs_stepwise(self, *, force: bool = False) -> Generator[Callable[[], None], None, int]:
        """`clean_logs` whose reading and writing steps the caller runs in a worker thread, the
        swaps staying on the caller's thread (LogCleaner.clean_logs_stepwise)."""
        return self.cleaner.clean_logs_stepwise(self._logs, force=force)

    def remove_expired_producers(self) -> int:
        """Forget idle producers (producer.id.expiration.ms) in every log; returns how many."""
        return sum(len(log.producer_state.remove_expired_producers()) for log in self._logs.values())

    def flush_all(self) -> None:
        """log.flush.interval.ms: every log's fsyncs to the flusher (recovery points follow)."""
        for log in self._logs.values():
            log.flush_in_background()

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Forget the logs of an offline dir without writing another byte there (Kafka's
        LogManager.handleLogDirFailure): no flush, no checkpoint, no clean-shutdown marker, so the
        next start recovers them. Returns their partitions."""
        if Path(log_dir) != self.data_dir:
            return []
        gone = list(self._logs)
        for key in gone:
            self._logs.pop(key).close_unflushed()
            self.cleaner.forget(key)
        return gone

    def shutdown(self) -> None:
        """Flush, close, checkpoint, then leave the clean-shutdown marker for the next start, on
        the caller's thread (the broker's is a worker: nothing else uses the logs by then)."""
        self.begin_shutdown()
        self.finish_shutdown()

    def _offline(self) -> bool:
        return self.failure_channel.is_offline(str(self.data_dir))

    def begin_shutdown(self) -> None:
        """Every log's last fsyncs and producer snapshot handed to the flusher; its files closed."""
        if self._offline():
            return  # not clean: handle_log_dir_failure closed the logs, the next start recovers
        try:
            for log in self._logs.values():
                log.close_in_background()
        except KafkaStorageError:  # the dir failed now (an inline flusher): stop as after any failure
            self.handle_log_dir_failure(str(self.data_dir))

    def finish_shutdown(self) -> None:
        """Once the flusher has done what begin_shutdown gave it (drained here otherwise): the
        checkpoints, with every recovery point at its log end, then the marker. None of that
        when the log dir failed meanwhile: the next start recovers."""
        try:
            self.flusher.drain()
            if not self._offline():
                self.checkpoint()
        except KafkaStorageError:
            pass  # the failure channel has the dir offline now
        if self._offline():
            self.handle_log_dir_failure(str(self.data_dir))
        self._logs.clear()
        self.flusher.close()
        self.files.close_all()
        if self._offline():
            return
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        marker.write_bytes(b"")
        fsync_dir(self.data_dir)
