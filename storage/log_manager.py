"""LogManager: every partition log in the broker's log directories (`log.dirs`), their checkpoint
files, retention and compaction; Kafka's LogManager.

Each dir (storage/log_dir.py) has its own checkpoints (recovery point, log start offset, high
watermark), cleaner checkpoint and `.kafka_cleanshutdown` marker, and fails on its own: the logs of
the others go on. A new log goes to the online dir holding the fewest (Kafka's nextLogDirs). A
replica being moved to another dir (AlterReplicaLogDirs) has a future log there until it is
swapped in. The logs share one bounded cache of segment descriptors and one flusher.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import storage
from protocol.errors import ErrorCode, KafkaError
from storage.checkpoint import (
    OffsetCheckpointFile,
    fsync_dir,
    fsync_path,
    write_text_atomically,
    write_texts_atomically,
)
from storage.disk_faults import DiskFaults
from storage.file_handles import DEFAULT_MAX_OPEN_FILES, FileHandleCache
from storage.log_config import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LogConfig
from storage.log_dir import CountedLogs, LogDir
from storage.log_dir_failure_channel import KafkaStorageError, LogDirFailureChannel, is_name_error
from storage.log_flusher import LogFlusher
from storage.naming import (
    DELETE_SUFFIX,
    FUTURE_SUFFIX,
    PARTITION_NAME_FILE,
    is_cut,
    log_dir_name,
    moved_dir_name,
    parse_delete_dir_name,
    parse_future_dir_name,
    parse_log_dir_name,
)
from storage.partition_metadata import PARTITION_METADATA_FILE, partition_metadata_text

if TYPE_CHECKING:
    from storage.log import Log
    from storage.log_cleaner import LogCleaner  # loaded by a LogDir when first cleaning

TopicPartition = tuple[str, int]
# A future log's own descriptor cache: its copier may append in a worker thread, which must not
# touch the shared cache (used from the loop's thread only).
FUTURE_LOG_OPEN_FILES = 4
Snapshot = list[tuple[LogDir, OffsetCheckpointFile, dict[TopicPartition, int]]]


# Logs whose folders and first segments one worker step makes (each ~1 ms of system calls).
CREATE_BATCH = 64


class LogManager:
    def __init__(
        self,
        log_dirs: Path | str | Sequence[Path | str],
        default_config: LogConfig,
        *,
        now_ms: Callable[[], int],
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        disk: DiskFaults | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        max_open_files: int = DEFAULT_MAX_OPEN_FILES,
        flusher: LogFlusher | None = None,
    ) -> None:
        paths = [log_dirs] if isinstance(log_dirs, (str, Path)) else list(log_dirs)
        if not paths:
            raise ValueError("log.dirs names no directory")
        self.failure_channel = failure_channel or LogDirFailureChannel()
        # Each dir's files write, fsync and truncate through the faults armed for it.
        self.dirs: dict[str, LogDir] = {}
        for path in paths:
            log_dir = LogDir(Path(path), now_ms, self.failure_channel,
                             disk.for_dir(str(path)) if disk is not None else None)
            self.dirs.setdefault(log_dir.name, log_dir)
        self.files = FileHandleCache(max_open_files)
        # Without one given, durability work runs on the caller's thread (tools and unit tests).
        self.flusher = flusher or LogFlusher(threaded=False)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.default_config = default_config
        self._now_ms = now_ms
        self._dir_counts: Counter[str] = Counter()  # logs per dir, future ones included
        self._logs: dict[TopicPartition, Log] = CountedLogs(self._dir_counts)
        # Replicas being moved to another dir (AlterReplicaLogDirs).
        self._future_logs: dict[TopicPartition, Log] = CountedLogs(self._dir_counts)
        self._topic_configs: dict[str, LogConfig] = {}
        self.load_problems: list[str] = []  # what load() skipped, for the broker to warn about
        # Partition folders seen in a dir that failed while loading: hosted here, but offline.
        self.offline_at_load: set[TopicPartition] = set()
        # Where a replica not hosted yet goes once it is (AlterReplicaLogDirs before LeaderAndIsr).
        self.preferred_log_dirs: dict[TopicPartition, str] = {}
        # Logs found on disk at load whose topic id (partition.metadata) nobody checked yet
        self.found_at_load: set[TopicPartition] = set()

    @property
    def data_dir(self) -> Path:
        """The first log dir (where tools that know one dir look)."""
        return next(iter(self.dirs.values())).path

    @property
    def cleaner(self) -> LogCleaner:
        """The first log dir's cleaner."""
        return next(iter(self.dirs.values())).cleaner

    @property
    def had_clean_shutdown(self) -> bool:
        return all(d.had_clean_shutdown for d in self.dirs.values())

    def online_dirs(self) -> list[LogDir]:
        return [d for d in self.dirs.values() if not d.offline]

    def load(self) -> None:
        """Open every `topic-N` folder of every dir; recover from the checkpoints unless the dir's
        last stop was clean. Runs in any one thread (the broker uses a worker): nothing else uses
        the manager yet. An I/O error takes that dir offline, as Kafka's loadLogs does; when no
        dir is left, KafkaStorageError."""
        self.load_problems = []
        errors: list[KafkaStorageError] = []
        for log_dir in self.dirs.values():
            try:
                self._load(log_dir)
            except OSError as exc:
                errors.append(self.failure_channel.storage_error(log_dir.name, "loading logs", exc))
            except KafkaStorageError as exc:
                errors.append(exc)
            if log_dir.offline:
                self._forget_dir(log_dir)
                self.offline_at_load |= _partition_folders(log_dir.path)
        if not self.online_dirs():
            raise errors[0] if errors else KafkaStorageError("every log dir is offline")

    def _load(self, log_dir: LogDir) -> None:
        data_dir = log_dir.path
        data_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir.clean_shutdown_file
        log_dir.had_clean_shutdown = clean = marker.exists()
        # A row that cannot be parsed back is skipped (its log recovers from its start, its high
        # watermark is caught up again) rather than keep the broker from starting.
        recovery_points = log_dir.recovery_points.read(self.load_problems)
        log_starts = log_dir.log_start_offsets.read(self.load_problems)
        high_watermarks = log_dir.high_watermarks.read(self.load_problems)
        futures: list[tuple[Path, TopicPartition]] = []
        for path in sorted(data_dir.iterdir()):
            if not path.is_dir():
                continue
            if parse_delete_dir_name(path.name) is not None:  # a finished move's old copy
                shutil.rmtree(path, ignore_errors=True)
                continue
            future_of = parse_future_dir_name(path.name)
            if future_of is not None and is_cut(future_of):
                future_of = self._partition_name(path)
            key = parse_log_dir_name(future_of if future_of is not None else path.name)
            if key is None:
                continue
            if future_of is not None:
                futures.append((path, key))
                continue
            if key in self._logs:
                self.load_problems.append(
                    f"{path} duplicates the log in {self._logs[key].log_dir}; left alone")
                continue
            log = self._open(path, key, recovery_points.get(key, 0), log_starts.get(key), clean)
            log.high_watermark = high_watermarks.get(key, 0)
            self._logs[key] = log
            self.found_at_load.add(key)
        for path, key in futures:
            # Only with every dir readable: a current log on a failed dir is not a missing one.
            if key not in self._logs and not any(d.offline for d in self.dirs.values()) and not any(
                    _may_exist(d.path / log_dir_name(*key)) for d in self.dirs.values()):
                # A crash in the swap after the current log was renamed away: the future log
                # was complete, it is the log now (its old copy, `-delete`, is gone or going).
                target = data_dir / log_dir_name(*key)
                path.rename(target)
                fsync_path(data_dir)
                (target / PARTITION_NAME_FILE).unlink(missing_ok=True)
                log = self._open(target, key, 0, log_starts.get(key), False)
                log.high_watermark = high_watermarks.get(key, 0)
                self._logs[key] = log
            else:  # the move goes on once the partition is hosted again
                self._future_logs[key] = self._open(
                    path, key, recovery_points.get(key, 0), log_starts.get(key), clean,
                    future=True)
        # From here on a crash is unclean again; the marker comes back only with shutdown().
        marker.unlink(missing_ok=True)

    def _partition_name(self, path: Path) -> str | None:
        """The partition folder's name a future folder with a cut name becomes (None: unknown,
        and the folder is left alone, said in load_problems)."""
        try:
            return (path / PARTITION_NAME_FILE).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            self.load_problems.append(f"{path}: no readable {PARTITION_NAME_FILE} ({exc}); "
                                      f"left alone")
            return None

    def _open(self, path: Path, key: TopicPartition, recovery_point: int,
              log_start_offset: int | None, clean: bool, *, future: bool = False) -> Log:
        log_dir = self.dirs[str(path.parent)]
        return storage.log.Log.open(
            path, self.config_for(key[0]), now_ms=self._now_ms, recovery_point=recovery_point,
            log_start_offset=log_start_offset, clean_shutdown=clean,
            producer_id_expiration_ms=self.producer_id_expiration_ms, disk=log_dir.disk,
            failure_channel=self.failure_channel, **self._io(future))

    def _io(self, future: bool) -> dict:
        """A future log's descriptors and durability work are its own (its copier's thread runs
        them inline, so none is pending when it is swapped in); the others share the manager's."""
        if future:
            return {"files": FileHandleCache(FUTURE_LOG_OPEN_FILES),
                    "flusher": LogFlusher(threaded=False)}
        return {"files": self.files, "flusher": self.flusher}

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_future_log(self, topic: str, partition: int) -> Log | None:
        return self._future_logs.get((topic, partition))

    def next_log_dir(self) -> LogDir:
        """The online dir holding the fewest logs (future ones included), the first listed on a
        tie (Kafka's nextLogDirs); KafkaStorageError when none is online."""
        online = [name for name, d in self.dirs.items() if not d.offline]
        if not online:
            raise KafkaStorageError("no online log dir to create a log in")
        return self.dirs[min(online, key=lambda name: self._dir_counts[name])]

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                   topic_id: uuid.UUID | None = None) -> Log:
        """Open (creating if needed) the log for topic-partition; an existing one is returned as is.
        A new one goes to next_log_dir(); with a `topic_id` it gets its partition.metadata with the
        folder's fsync."""
        if config is not None:
            self._topic_configs[topic] = config
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            if parse_log_dir_name(log_dir_name(topic, partition)) != key:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"bad topic name {topic!r}")
            preferred = self.dirs.get(self.preferred_log_dirs.pop(key, ""))
            log_dir = preferred if preferred is not None and not preferred.offline \
                else self.next_log_dir()
            log = self._create(log_dir, log_dir_name(topic, partition), topic, topic_id)
            self._logs[key] = log
        return log

    def create_logs_stepwise(
        self, wanted: Sequence[tuple[str, int, LogConfig | None, uuid.UUID | None, int | None]],
    ) -> Generator[Callable[[], None], None, None]:
        """create_log for many partitions, the file system's part of it (a folder and a segment
        file: ~1 ms of system calls each) in the steps it yields, for a worker thread; each log
        joins the manager where the generator is advanced. A log that could not be made is left
        out: create_log meets that failure itself (and takes its dir offline).

        Each wanted log may name the leader epoch this broker leads it in: its leader-epoch
        checkpoint (that epoch from offset 0, what becoming leader assigns) is then written with
        its partition.metadata, in the same group commit."""
        planned: Counter[str] = Counter()  # logs given to each dir by this call, not yet joined
        plans: list[tuple[TopicPartition, LogDir, uuid.UUID | None, int | None]] = []
        for topic, partition, config, topic_id, leader_epoch in wanted:
            if config is not None:
                self._topic_configs[topic] = config
            key = (topic, partition)
            if key in self._logs or parse_log_dir_name(log_dir_name(topic, partition)) != key:
                continue
            preferred = self.dirs.get(self.preferred_log_dirs.get(key, ""))
            if preferred is not None and not preferred.offline:
                log_dir = preferred
            else:
                online = [name for name, d in self.dirs.items() if not d.offline]
                if not online:
                    return
                log_dir = self.dirs[min(online, key=lambda n: self._dir_counts[n] + planned[n])]
            planned[log_dir.name] += 1
            plans.append((key, log_dir, topic_id, leader_epoch))
        for start in range(0, len(plans), CREATE_BATCH):
            batch = plans[start : start + CREATE_BATCH]
            opened: dict[TopicPartition, Log] = {}

            def open_batch(batch: list = batch, opened: dict = opened) -> None:
                for key, log_dir, _, _ in batch:
                    with contextlib.suppress(OSError, KafkaStorageError):
                        log = self._open_new(log_dir, log_dir_name(*key), key[0],
                                             FileHandleCache(1), self.flusher)
                        log.files.close_all()  # here: joining the shared cache closes nothing
                        opened[key] = log

            yield open_batch
            joined: list[tuple[Log, LogDir, uuid.UUID | None]] = []
            for key, log_dir, topic_id, leader_epoch in batch:
                log = opened.get(key)
                if log is None:
                    continue
                if key in self._logs or log_dir.offline:  # made meanwhile, or its dir failed
                    log.close()
                    continue
                self.preferred_log_dirs.pop(key, None)
                log.adopt_files(self.files)
                self._logs[key] = log
                if leader_epoch is not None:  # its file goes with partition.metadata's
                    log.leader_epoch_cache.assign(leader_epoch, 0, flush=False)
                joined.append((log, log_dir, topic_id))
            self._make_durable_together(joined, self.flusher)

    def _create(self, log_dir: LogDir, name: str, topic: str, topic_id: uuid.UUID | None,
                *, future: bool = False, partition_name: str | None = None) -> Log:
        io = self._io(future)
        log = self._open_new(log_dir, name, topic, io["files"], io["flusher"])
        if partition_name is not None:  # the folder's name was cut: the whole one, for a load
            try:
                write_text_atomically(log.directory / PARTITION_NAME_FILE, partition_name,
                                      log_dir.disk)
            except OSError as exc:
                log.close()
                raise self._creation_error(log_dir, name, exc) from exc
        self._make_durable(log, log_dir, topic_id, io["flusher"])
        return log

    def _open_new(self, log_dir: LogDir, name: str, topic: str, files: FileHandleCache,
                  flusher: LogFlusher) -> Log:
        """A log's folder and first segment, made if new (any thread)."""
        self.failure_channel.check_online(log_dir.name, f"creating log {name}")
        path, log = log_dir.path / name, storage.log.Log
        settings = {"now_ms": self._now_ms, "disk": log_dir.disk, "files": files,
                    "flusher": flusher, "failure_channel": self.failure_channel,
                    "producer_id_expiration_ms": self.producer_id_expiration_ms}
        try:
            try:
                return log.create(path, self.config_for(topic), **settings)
            except FileExistsError:  # a folder left there (by no log of ours): loaded as it is
                return log.open(path, self.config_for(topic), **settings)
        except OSError as exc:
            raise self._creation_error(log_dir, name, exc) from exc

    def _creation_error(self, log_dir: LogDir, name: str, exc: OSError) -> KafkaStorageError:
        """A new log that could not be made. A path the file system cannot name fails that log
        only (what was made of it is removed); any other error takes its dir offline."""
        if not is_name_error(exc):
            return self.failure_channel.storage_error(log_dir.name, f"creating log {name}", exc)
        shutil.rmtree(log_dir.path / name, ignore_errors=True)
        return KafkaStorageError(f"Error while creating log {name} in dir {log_dir.name}: {exc}")

    def _make_durable(self, log: Log, log_dir: LogDir, topic_id: uuid.UUID | None,
                      flusher: LogFlusher) -> None:
        """The new folder and its first segment file fsynced, with the topic id's file."""
        self._make_durable_together([(log, log_dir, topic_id)], flusher)

    def _make_durable_together(self, logs: list[tuple[Log, LogDir, uuid.UUID | None]],
                               flusher: LogFlusher) -> None:
        """_make_durable for new logs made together: their partition.metadata files written as
        one group commit (write_texts_atomically), each folder and each log dir holding some
        made durable once (not once per log: thousands of new partitions are thousands of
        fsyncs of the same folder otherwise)."""
        if not logs:
            return

        # The files' texts are taken now, on the thread owning the logs.
        files = [(log, log_dir, log.directory / PARTITION_METADATA_FILE,
                  partition_metadata_text(topic_id), None)
                 for log, log_dir, topic_id in logs if topic_id is not None]
        files += [(log, log_dir, cache.checkpoint.path, cache.checkpoint_text(), log_dir.disk)
                  for log, log_dir, _ in logs
                  if (cache := log.leader_epoch_cache).latest_entry is not None]

        def make_durable() -> None:
            live = [(log, log_dir, topic_id) for log, log_dir, topic_id in logs if not log.deleted]
            parents = {log_dir.name: log_dir for _, log_dir, _ in live}
            written = [file for file in files if not file[0].deleted]

            def failed(i: int, exc: OSError) -> None:
                log, log_dir = written[i][:2]
                if not log.deleted:  # else its folder went under the write: nothing lost
                    raise self.failure_channel.storage_error(
                        log_dir.name, f"creating log {log.directory.name}", exc) from exc

            synced = write_texts_atomically([file[2:] for file in written],
                                            [log_dir.path for log_dir in parents.values()], failed)
            for log, log_dir, topic_id in live:
                if topic_id is None and not synced:
                    try:
                        fsync_path(log.directory)
                    except OSError as exc:
                        if not log.deleted:
                            raise self.failure_channel.storage_error(
                                log_dir.name, f"creating log {log.directory.name}", exc) from exc
                if log.deleted:  # deleted while this wrote in its folder: what it wrote goes too
                    shutil.rmtree(log.directory, ignore_errors=True)
            for log_dir in () if synced else parents.values():
                try:
                    fsync_path(log_dir.path)
                except OSError as exc:
                    raise self.failure_channel.storage_error(
                        log_dir.name, "creating logs", exc) from exc

        flusher.submit(make_durable)

    def create_future_log(self, topic: str, partition: int, log_dir: str,
                          topic_id: uuid.UUID | None = None) -> Log:
        """The future log of a replica moving to `log_dir` (AlterReplicaLogDirs), starting at
        the current log's start offset; an existing one there is returned as is."""
        key = (topic, partition)
        current = self._logs.get(key)
        if current is None:
            raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE, f"no log of {topic}-{partition} here")
        future = self._future_logs.get(key)
        if future is not None:
            if future.log_dir == log_dir:
                return future
            self.delete_future_log(topic, partition)  # moving elsewhere now: start again there
        stem = log_dir_name(topic, partition)
        name = moved_dir_name(stem, FUTURE_SUFFIX)
        future = self._create(self.dirs[log_dir], name, topic, topic_id, future=True,
                              partition_name=stem if is_cut(name) else None)
        future.truncate_fully_and_start_at(current.log_start_offset)
        self._future_logs[key] = future
        return future

    def delete_future_log(self, topic: str, partition: int) -> bool:
        future = self._future_logs.pop((topic, partition), None)
        if future is None:
            return False
        future.delete()
        future.files.close_all()
        return True

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """Swap a caught-up future log in (Kafka's replaceCurrentWithFutureLog): the current folder
        is renamed `-delete`, the future one takes the partition's name, both parent folders are
        fsynced, the old copy is deleted. A crash in between is finished by the next load. Returns
        the log as reopened from its new place."""
        key = (topic, partition)
        current, future = self._logs[key], self._future_logs.pop(key)
        if current.log_start_offset > future.log_start_offset:  # retention went on meanwhile
            future.high_watermark = future.log_end_offset
            future.increment_log_start_offset(current.log_start_offset)
        future.flush()
        future.close()
        future.files.close_all()
        current.deleted = True  # its flush jobs still queued are moot: the copy is the log now
        target = Path(future.log_dir) / log_dir_name(topic, partition)
        doomed = current.directory.with_name(
            moved_dir_name(current.directory.name, DELETE_SUFFIX))
        try:
            current.close_unflushed()
            current.directory.rename(doomed)
            fsync_dir(doomed.parent)
            future.directory.rename(target)
            fsync_dir(target.parent)
            (target / PARTITION_NAME_FILE).unlink(missing_ok=True)  # its name says it now
        except OSError as exc:
            raise self.failure_channel.storage_error(
                future.log_dir, f"swapping in the future log of {topic}-{partition}", exc) from exc
        log = self._open(target, key, future.log_end_offset, future.log_start_offset, True)
        log.high_watermark = current.high_watermark
        self._logs[key] = log
        self.dirs[current.log_dir].cleaner.forget(key, self.flusher.submit)
        self.flusher.submit(functools.partial(shutil.rmtree, doomed, ignore_errors=True))
        return log

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log (and its future log) and remove its folder; False when there was none."""
        self.delete_future_log(topic, partition)
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        log.delete()
        self.dirs[log.log_dir].cleaner.forget((topic, partition), self.flusher.submit)
        if not any(t == topic for t, _ in self._logs):
            self._topic_configs.pop(topic, None)
        return True

    def update_configs(self, configs: dict[str, LogConfig]) -> None:
        """New configs for many topics, every log visited once."""
        self._topic_configs.update(configs)
        for logs in (self._logs, self._future_logs):
            for (t, _), log in logs.items():
                if t in configs:
                    log.update_config(configs[t])

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for logs in (self._logs, self._future_logs):
            for (t, _), log in logs.items():
                if t == topic:
                    log.update_config(config)

    def checkpoint(self) -> None:
        """Write every online dir's recovery point, log start offset and high watermark files
        (each atomically)."""
        self.write_checkpoints(self.checkpoint_snapshot())

    def checkpoint_snapshot(self) -> Snapshot:
        """The offsets to checkpoint, taken now (cheap); `write_checkpoints` may run elsewhere.
        A future log's go in its own dir's files (where it is the log after a swap)."""
        snapshot: Snapshot = []
        for log_dir in self.online_dirs():
            logs = [(k, log) for logs in (self._logs, self._future_logs)
                    for k, log in logs.items() if log.log_dir == log_dir.name]
            snapshot += [
                (log_dir, log_dir.recovery_points, {k: log.recovery_point for k, log in logs}),
                (log_dir, log_dir.log_start_offsets, {k: log.log_start_offset for k, log in logs}),
                (log_dir, log_dir.high_watermarks, {k: log.high_watermark for k, log in logs}),
            ]
        return snapshot

    def write_checkpoints(self, snapshot: Snapshot) -> None:
        """Write a snapshot's files; safe to call from a worker thread (writes are serialised per
        dir). A dir that fails goes offline; the other dirs' files are still written."""
        failure: KafkaStorageError | None = None
        for log_dir, file, offsets in snapshot:
            if log_dir.offline:
                continue  # an offline dir is never written again (its logs are already forgotten)
            with log_dir.checkpoint_lock:
                try:
                    file.write(offsets)
                except OSError as exc:  # as a failed log write: the dir goes offline
                    failure = failure or self.failure_channel.storage_error(
                        log_dir.name, "writing checkpoint files", exc)
        if failure is not None:
            raise failure

    def cleanup(self) -> int:
        """Retention on every log; returns the number of segments deleted."""
        return sum(log.delete_old_segments() for log in self._logs.values())

    def _logs_in(self, log_dir: LogDir) -> dict[TopicPartition, Log]:
        return {k: log for k, log in self._logs.items() if log.log_dir == log_dir.name}

    def logs_in(self, log_dir: str) -> dict[TopicPartition, Log]:
        """The logs in one dir (future ones not included)."""
        return {k: log for k, log in self._logs.items() if log.log_dir == log_dir}

    def future_logs_in(self, log_dir: str) -> dict[TopicPartition, Log]:
        return {k: log for k, log in self._future_logs.items() if log.log_dir == log_dir}

    def clean_logs(self, *, force: bool = False) -> int:
        """Compaction (storage/log_cleaner.py) on every compacted log, dir by dir; returns how
        many were cleaned."""
        return sum(d.cleaner.clean_logs(self._logs_in(d), force=force) for d in self.online_dirs())

    def clean_logs_stepwise(self, *, force: bool = False) -> Generator[Callable[[], None], None, int]:
        """`clean_logs` whose reading and writing steps the caller runs in a worker thread, the
        swaps staying on the caller's thread (LogCleaner.clean_logs_stepwise)."""
        cleaned = 0
        for log_dir in self.online_dirs():
            cleaned += yield from log_dir.cleaner.clean_logs_stepwise(self._logs_in(log_dir),
                                                                      force=force)
        return cleaned

    def remove_expired_producers(self) -> int:
        """Forget idle producers (producer.id.expiration.ms) in every log; returns how many."""
        return sum(len(log.producer_state.remove_expired_producers()) for log in self._logs.values())

    def flush_all(self) -> None:
        """log.flush.interval.ms: every log's fsyncs to the flusher (recovery points follow)."""
        for log in self._logs.values():  # future logs are flushed inline by their copier
            log.flush_in_background()

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Forget the logs of an offline dir without writing another byte there (Kafka's
        LogManager.handleLogDirFailure): no flush, no checkpoint, no clean-shutdown marker, so the
        next start recovers them. A move into or out of it is abandoned. Returns its partitions."""
        found = self.dirs.get(log_dir)
        return self._forget_dir(found) if found is not None else []

    def _forget_dir(self, log_dir: LogDir) -> list[TopicPartition]:
        gone = [k for k, log in self._logs.items() if log.log_dir == log_dir.name]
        for key in gone:
            self._logs.pop(key).close_unflushed()
            log_dir.cleaner.forget(key)
        for key, future in list(self._future_logs.items()):
            if future.log_dir == log_dir.name or key in gone:
                del self._future_logs[key]
                if future.log_dir == log_dir.name:
                    future.close_unflushed()
                else:  # its current log is gone: the copy can never finish
                    future.delete()
                future.files.close_all()
        return gone

    def shutdown(self) -> None:
        """Flush, close, checkpoint, then leave the clean-shutdown markers for the next start, on
        the caller's thread (the broker's is a worker: nothing else uses the logs by then)."""
        self.begin_shutdown()
        self.finish_shutdown()

    def crash(self) -> None:
        """A killed broker's logs: every descriptor closed as it stands, with no last fsync,
        checkpoint, producer snapshot or clean-shutdown marker, so the next start recovers them
        (`kafka-sim simulate`'s crashes)."""
        for log in [*self._logs.values(), *self._future_logs.values()]:
            for segment in log.segments:
                segment.close_unflushed()
        self._logs.clear()
        self._future_logs.clear()
        self.flusher.close()
        self.files.close_all()

    def begin_shutdown(self) -> None:
        """Every log's last fsyncs and producer snapshot handed to the flusher; its files closed.
        Nothing for an offline dir: not clean, handle_log_dir_failure closed its logs, the next
        start recovers them."""
        for log in [*self._logs.values(), *self._future_logs.values()]:
            if self.failure_channel.is_offline(log.log_dir):
                continue
            try:
                log.close_in_background()
            except KafkaStorageError:  # the dir failed now (an inline flusher)
                self.handle_log_dir_failure(log.log_dir)

    def finish_shutdown(self) -> None:
        """Once the flusher has done what begin_shutdown gave it (drained here otherwise): the
        checkpoints, with every recovery point at its log end, then the markers. None of that
        for a log dir that failed meanwhile: the next start recovers it."""
        # A KafkaStorageError here has its dir offline now: the others are still checkpointed.
        with contextlib.suppress(KafkaStorageError):
            self.flusher.drain()
        with contextlib.suppress(KafkaStorageError):
            self.checkpoint()
        for log_dir in self.dirs.values():
            if log_dir.offline:
                self._forget_dir(log_dir)
        self._logs.clear()
        for future in self._future_logs.values():
            future.files.close_all()
        self._future_logs.clear()
        self.flusher.close()
        self.files.close_all()
        for log_dir in self.online_dirs():
            log_dir.clean_shutdown_file.write_bytes(b"")
            fsync_dir(log_dir.path)


def _may_exist(path: Path) -> bool:
    """Whether a folder exists, True when that cannot be told (a failing disk)."""
    try:
        return path.exists()
    except OSError:
        return True


def _partition_folders(path: Path) -> set[TopicPartition]:
    """The partitions a failed dir holds, as far as its listing can still be read."""
    try:
        names = [p.name for p in path.iterdir()]
    except OSError:
        return set()
    return {key for name in names if (key := parse_log_dir_name(name)) is not None}
