"""LogCleaner: compaction of `cleanup.policy=compact` logs as Kafka's LogCleaner does it: below the
active segment and the high watermark, only the latest record of each key survives.

One pass over a log (Kafka's Cleaner.doClean):
  1. cleanable range: from the first dirty offset (the `cleaner-offset-checkpoint` entry, else the
     log start) to the end of the last inactive segment that is wholly below the high watermark and
     older than min.compaction.lag.ms; the pass runs when dirty bytes / (clean + dirty bytes) is
     above min.cleanable.dirty.ratio (or when forced);
  2. offset map: key -> latest offset over the dirty part of that range;
  3. every segment from the log start to the end of the range is rewritten, adjacent small ones
     grouped into one (the first's base offset kept, at most segment.bytes), keeping a record when
     its key has no later offset in the map; null-key records, control and transactional batches
     are kept as they are; tombstones go once their segment is delete.retention.ms old;
  4. a batch losing records is re-encoded with its original base offset, lastOffsetDelta, producer
     id/epoch/sequence, timestamps and codec (CRC recomputed); a batch losing all of them goes,
     unless it is its producer's last batch: then an empty one stays, so that the producer's
     sequence survives (Kafka's retainLastBatchSequence / isBatchLastRecordOfProducer);
  5. swap, crash-safe: write `<base>.log.cleaned`, fsync, rename to `.log.swap`, fsync the folder,
     delete the sources, rename the swap to `<base>.log` (storage/log_loader.py finishes or
     discards it after a crash);
  6. the checkpoint moves to the end of the range.

The broker runs its passes off the event loop (`clean_logs_stepwise`), in three steps per log, as
Kafka's cleaner works on copies and swaps them in under the log's lock: `prepare` on the loop picks
the range and takes read-only snapshots of its segments (own file descriptors) and of the producer
state; `compute` in a worker thread builds the offset map and writes the `.cleaned` files from the
snapshots only; `stage` on the loop renames them to `.swap` once every segment of the range is
still the log's, unchanged (a truncation, deletion or retention meanwhile aborts the pass for that
log, its files discarded), a worker fsyncs the folder, and `commit` on the loop checks again and
swaps them in (the folder and index fsyncs that follow go to the log's flusher). The checkpoint
file is written by a worker too. Appends only wait for the swaps.

A pass that fails on one log (a batch it cannot decode) is logged and that log is marked
uncleanable, as Kafka's LogCleanerManager.markPartitionUncleanable does: the pass goes on with the
other logs, and later passes skip it until it is deleted (or the cleaner restarts). An I/O error
takes the log's dir offline through the LogDirFailureChannel, as Kafka's cleaner thread does.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Generator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import structlog

from protocol.errors import KafkaError
from protocol.records import (
    HEADER_STRUCT,
    MAX_DECOMPRESSED_BYTES,
    BatchHeader,
    decode_batch,
    decompression_limit,
    rebuild_batch,
)
from storage.checkpoint import OffsetCheckpointFile, fsync_dir
from storage.disk_faults import DiskFaults, FileKind
from storage.log import Log
from storage.log_config import INT_MAX
from storage.log_dir_failure_channel import KafkaStorageError, LogDirFailureChannel
from storage.log_flusher import Job, run_now
from storage.naming import CLEANED_SUFFIX, CLEANER_CHECKPOINT, SWAP_SUFFIX, log_file
from storage.segment import RECOVERY_CHUNK, LogSegment, SegmentSnapshot

TopicPartition = tuple[str, int]
logger = structlog.get_logger("kafka_sim.log_cleaner")


@dataclass(slots=True)
class LogToClean:
    """The cleanable part of one log (Kafka's LogToClean)."""

    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base offset: the range's end
    clean_bytes: int
    dirty_bytes: int
    segments: list[LogSegment]  # from the log start to first_uncleanable_offset

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerStats:
    """What one pass over one log did."""

    first_dirty_offset: int
    end_offset: int
    segments_cleaned: int = 0
    segments_written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_removed: int = 0
    empty_batches_kept: int = 0
    keys_in_map: int = 0


def is_compacted(log: Log) -> bool:
    return "compact" in log.config.cleanup_policy.split(",")


def cleanable(log: Log, checkpoint: int | None, now_ms: int) -> LogToClean | None:
    """The range a pass would clean, or None when there is no inactive dirty segment to clean."""
    start = log.log_start_offset
    first_dirty = start
    if checkpoint is not None and start <= checkpoint <= log.log_end_offset:
        first_dirty = checkpoint  # outside the log (truncated, deleted records): start again
    segments = list(log.segments)
    lag = log.config.min_compaction_lag_ms
    chosen: list[LogSegment] = []
    clean_bytes = dirty_bytes = 0
    for segment, following in pairwise(segments):  # never the active segment
        if following.base_offset > log.high_watermark:
            break
        if lag > 0 and now_ms - segment.largest_timestamp() < lag:
            break
        chosen.append(segment)
        if following.base_offset <= first_dirty:
            clean_bytes += segment.size
        else:
            dirty_bytes += segment.size
    if not chosen:
        return None
    end = segments[len(chosen)].base_offset
    if first_dirty >= end:
        return None
    return LogToClean(first_dirty, end, clean_bytes, dirty_bytes, chosen)


def group_segments(segments: Sequence[LogSegment], max_size: int) -> list[list[LogSegment]]:
    """Adjacent segments grouped while the sum of their sizes fits segment.bytes and their offsets
    stay relative to the first's base (Kafka's groupSegmentsBySize)."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        group = groups[-1] if groups else None
        if (
            group is not None
            and sum(s.size for s in group) + segment.size <= max_size
            and segment.next_offset - 1 - group[0].base_offset <= INT_MAX
        ):
            group.append(segment)
        else:
            groups.append([segment])
    return groups


@dataclass(slots=True)
class CleanJob:
    """One log's pass between `prepare` (loop), `compute` (worker thread) and `commit` (loop)."""

    log: Log
    to_clean: LogToClean  # its segments are SegmentSnapshots
    stats: CleanerStats
    producer_last: dict[int, int]
    delete_horizon_ms: int
    segment_bytes: int
    outputs: list[tuple[list[SegmentSnapshot], Path]] = field(default_factory=list)
    # Per output file (by its group's base offset): (position, header) of every batch written, so
    # that the swap indexes it without reading the file back on the loop.
    layouts: dict[int, list[tuple[int, BatchHeader]]] = field(default_factory=dict)

    def discard(self) -> None:
        for _, path in self.outputs:
            path.unlink(missing_ok=True)
            self.log.pending_swaps.discard(path)
        self.outputs.clear()

    def close(self) -> None:
        for snapshot in self.to_clean.segments:
            snapshot.close()


def _still_current(log: Log, group: Sequence[SegmentSnapshot]) -> bool:
    """Are the group's sources still adjacent inactive segments of `log`, unchanged?"""
    segments = log.segments
    first = next((i for i, s in enumerate(segments) if s is group[0].segment), None)
    if first is None or first + len(group) >= len(segments):  # gone, or now reaching the active one
        return False
    return all(segments[first + k] is snap.segment and snap.is_current()
               for k, snap in enumerate(group))


class LogCleaner:
    def __init__(self, data_dir: Path, now_ms: Callable[[], int],
                 failure_channel: LogDirFailureChannel | None = None,
                 disk: DiskFaults | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.disk = disk or DiskFaults()  # the dir's injected faults: cleaner and checkpoint kinds
        self.checkpoint_file = OffsetCheckpointFile(self.data_dir / CLEANER_CHECKPOINT, disk)
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self._now_ms = now_ms
        self.stats: dict[TopicPartition, CleanerStats] = {}  # the last pass per log, for admins
        # Logs a pass failed on (an I/O error, records it cannot decode): skipped from then on, as
        # Kafka's uncleanable partitions, with the reason.
        self.uncleanable: dict[TopicPartition, str] = {}
        # Malformed lines of cleaner-offset-checkpoint, skipped (those logs are cleaned from their
        # start again) rather than stopping the cleaner; the next write drops them.
        self.checkpoint_problems: list[str] = []
        self.in_progress: set[TopicPartition] = set()  # in a worker thread right now

    def clean_logs(
        self, logs: Mapping[TopicPartition, Log], *, force: bool = False, now_ms: int | None = None
    ) -> int:
        """One pass over every compacted log that needs one; returns how many logs were cleaned."""
        checkpoints = self._read_checkpoints(logs)
        cleaned = 0
        for tp, log in list(logs.items()):
            if not self._wanted(tp, log):
                continue
            try:
                stats = self.clean(log, checkpoints.get(tp), force=force, now_ms=now_ms)
            except Exception as exc:
                self._failed(tp, log, exc)
                continue
            cleaned += self._record(tp, stats, checkpoints)
        write = self._checkpoint_write(checkpoints, logs, cleaned)
        if write is not None:
            write()
        return cleaned

    def clean_logs_stepwise(
        self, logs: MutableMapping[TopicPartition, Log], *, force: bool = False,
        now_ms: int | None = None,
    ) -> Generator[Callable[[], None], None, int]:
        """`clean_logs` for a caller that runs each log's compute step elsewhere: a generator that
        yields the step (run it in a worker thread, then `send(None)`, or `throw` its exception) and
        returns how many logs were cleaned. Everything else runs where it is advanced (the log's
        thread). `logs` is the owner's live map: a log deleted meanwhile is neither swapped into nor
        checkpointed. Close it only once no step of it is running."""
        checkpoints = self._read_checkpoints(logs)
        cleaned = 0
        for tp, log in list(logs.items()):
            if logs.get(tp) is not log or not self._wanted(tp, log):
                continue
            self.in_progress.add(tp)
            job = None
            try:
                job = self.prepare(log, checkpoints.get(tp), force=force, now_ms=now_ms)
                if job is None:
                    continue
                yield functools.partial(self.compute, job)
                stats = None
                if logs.get(tp) is not log:  # deleted while the step ran
                    job.discard()
                    continue
                if self.stage(job):
                    # The swaps' renames durable before any source goes; the log may change
                    # meanwhile (its pending swaps are then removed, and commit drops the pass).
                    yield functools.partial(fsync_dir, log.directory)
                    if logs.get(tp) is not log:
                        job.discard()
                        continue
                    stats = self.commit(job)
                if stats is None:
                    logger.info("log changed while it was cleaned; the pass is dropped for it",
                                topic=tp[0], partition=tp[1])
            except GeneratorExit:
                if job is not None:
                    job.discard()
                raise
            except Exception as exc:
                if job is not None:
                    job.discard()
                if logs.get(tp) is log:  # not merely deleted under the step
                    self._failed(tp, log, exc)
                continue
            finally:
                self.in_progress.discard(tp)
                if job is not None:
                    job.close()
            cleaned += self._record(tp, stats, checkpoints)
        write = self._checkpoint_write(checkpoints, logs, cleaned)
        if write is not None:
            with contextlib.suppress(KafkaStorageError):  # the dir is offline now
                yield write
        return cleaned

    def _wanted(self, tp: TopicPartition, log: Log) -> bool:
        return (is_compacted(log) and tp not in self.uncleanable and tp not in self.in_progress
                and not self.failure_channel.is_offline(log.log_dir))

    def _read_checkpoints(self, logs: Mapping[TopicPartition, Log]) -> dict[TopicPartition, int]:
        for gone in set(self.uncleanable) - set(logs):  # Kafka's maintainUncleanablePartitions
            del self.uncleanable[gone]
        return self.checkpoint_file.read(self.checkpoint_problems)

    def _failed(self, tp: TopicPartition, log: Log, exc: Exception) -> None:
        if isinstance(exc, OSError):
            # Kafka's cleaner thread on an IOException: the log's dir goes offline (its
            # partitions answer KAFKA_STORAGE_ERROR from now on; the broker halts on its last dir).
            self.failure_channel.storage_error(
                log.log_dir, f"cleaning log {log.directory.name}", exc)
            logger.error("I/O error cleaning log; its log dir goes offline", topic=tp[0],
                         partition=tp[1], error=repr(exc))
            return
        # One bad log does not stop the others (Kafka's LogCleaningException).
        logger.exception("error cleaning log; marking it uncleanable", topic=tp[0], partition=tp[1])
        self.uncleanable[tp] = (exc.message or exc.code.name) if isinstance(exc, KafkaError) \
            else repr(exc)

    def _record(self, tp: TopicPartition, stats: CleanerStats | None,
                checkpoints: dict[TopicPartition, int]) -> int:
        if stats is None:
            return 0
        self.stats[tp] = stats
        checkpoints[tp] = stats.end_offset
        return 1

    def _checkpoint_write(self, checkpoints: dict[TopicPartition, int],
                          logs: Mapping[TopicPartition, Log], cleaned: int
                          ) -> Callable[[], None] | None:
        """The checkpoint file's write after a pass (to run in any thread), or None when it
        would not change. Only cleaned data is named: every swap's rename is durable by now."""
        kept = {tp: offset for tp, offset in checkpoints.items() if tp in logs}
        if not cleaned and len(kept) == len(checkpoints):
            return None

        def write() -> None:
            try:
                self.checkpoint_file.write(kept)
            except OSError as exc:
                raise self.failure_channel.storage_error(
                    str(self.data_dir), "writing the cleaner checkpoint", exc) from exc

        return write

    def forget(self, tp: TopicPartition, submit: Callable[[Job], None] = run_now) -> None:
        """A deleted log: its checkpoint entry goes, rewritten by `submit` (the flusher's: off the
        loop); nothing is written to an offline dir."""
        self.stats.pop(tp, None)
        self.uncleanable.pop(tp, None)
        if self.failure_channel.is_offline(str(self.data_dir)):
            return

        def rewrite() -> None:
            try:
                checkpoints = self.checkpoint_file.read(self.checkpoint_problems)
                if checkpoints.pop(tp, None) is not None:
                    self.checkpoint_file.write(checkpoints)
            except OSError as exc:
                raise self.failure_channel.storage_error(
                    str(self.data_dir), "writing the cleaner checkpoint", exc) from exc

        submit(rewrite)

    def clean(
        self, log: Log, checkpoint: int | None, *, force: bool = False, now_ms: int | None = None
    ) -> CleanerStats | None:
        """Clean one log if its dirty ratio calls for it (always when forced); None when not run."""
        job = self.prepare(log, checkpoint, force=force, now_ms=now_ms)
        if job is None:
            return None
        try:
            self.compute(job)
            if not self.stage(job):
                return None
            fsync_dir(log.directory)
            return self.commit(job)
        finally:
            job.close()

    def prepare(
        self, log: Log, checkpoint: int | None, *, force: bool = False, now_ms: int | None = None
    ) -> CleanJob | None:
        """On the log's thread: the range to clean, with snapshots of its segments; None when the
        log needs no pass. The caller closes the job."""
        now = self._now_ms() if now_ms is None else now_ms
        to_clean = cleanable(log, checkpoint, now)
        if to_clean is None or to_clean.dirty_bytes == 0:
            return None
        if not force and to_clean.cleanable_ratio <= log.config.min_cleanable_dirty_ratio:
            return None
        snapshots: list[SegmentSnapshot] = []
        try:
            for segment in to_clean.segments:
                snapshots.append(segment.snapshot())
        except BaseException:
            for snapshot in snapshots:
                snapshot.close()
            raise
        to_clean.segments = snapshots  # type: ignore[assignment]  # read alike
        return CleanJob(
            log,
            to_clean,
            CleanerStats(to_clean.first_dirty_offset, to_clean.first_uncleanable_offset),
            {pid: entry.last_offset for pid, entry in log.producer_state.producers.items()},
            now - log.config.delete_retention_ms,
            log.config.segment_bytes,
        )

    def compute(self, job: CleanJob) -> None:
        """Anywhere (a worker thread): the offset map and the `.cleaned` files, from the job's
        snapshots only; the log itself is not touched."""
        max_decompressed = decompression_limit(job.log.config.max_message_bytes)
        offset_map = self.build_offset_map(job.to_clean, max_decompressed=max_decompressed)
        job.stats.keys_in_map = len(offset_map)
        try:
            for group in group_segments(job.to_clean.segments, job.segment_bytes):
                layout = job.layouts[group[0].base_offset] = []
                cleaned = self.write_cleaned(job.log, group, offset_map, job.producer_last,
                                             job.delete_horizon_ms, job.stats,
                                             max_decompressed=max_decompressed, layout=layout)
                job.outputs.append((list(group), cleaned))  # type: ignore[arg-type]
        except BaseException:
            job.discard()
            raise

    def stage(self, job: CleanJob) -> bool:
        """On the log's thread: rename the `.cleaned` files to `.swap` (the point from which a
        crash finishes the swap) if the log is unchanged; False (files discarded) otherwise. The
        caller fsyncs the folder before commit."""
        if not _still_current(job.log, job.to_clean.segments):  # type: ignore[arg-type]
            job.discard()
            return False
        for i, (group, cleaned) in enumerate(job.outputs):
            swap = self.swap(cleaned)
            job.outputs[i] = (group, swap)
            job.log.pending_swaps.add(swap)
        return True

    @staticmethod
    def swap(cleaned: Path) -> Path:
        """`.cleaned` -> `.swap`: once this rename is durable, a crash finishes the swap."""
        swap = cleaned.with_name(cleaned.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX)
        cleaned.replace(swap)
        return swap

    def commit(self, job: CleanJob) -> CleanerStats | None:
        """On the log's thread, once the staged `.swap` files' renames are durable: swap them in
        if every source segment is still the log's and unchanged; None (and the files discarded)
        when the log changed under the pass."""
        log, outputs = job.log, job.outputs
        # Every segment the offset map was built from must still be there as it was: a truncation
        # anywhere in the range (a follower, Kafka aborts cleaning for it) voids the whole pass.
        if not _still_current(log, job.to_clean.segments):  # type: ignore[arg-type]
            job.discard()
            return None
        try:
            while outputs:
                # Out of `outputs` first: once its sources may be gone, the swap is never discarded.
                group, swap = outputs.pop(0)
                log.replace_segments([snapshot.segment for snapshot in group], swap,
                                     job.layouts.get(group[0].base_offset))
                job.stats.segments_cleaned += len(group)
                job.stats.segments_written += 1
        except BaseException:
            job.discard()
            raise
        return job.stats

    @staticmethod
    def build_offset_map(
        to_clean: LogToClean, *, max_decompressed: int = MAX_DECOMPRESSED_BYTES
    ) -> dict[bytes, int]:
        """key -> latest offset over the dirty range (control and transactional batches left out)."""
        offset_map: dict[bytes, int] = {}
        start, end = to_clean.first_dirty_offset, to_clean.first_uncleanable_offset
        for segment in to_clean.segments:
            if segment.next_offset <= start:
                continue
            for _, header, view in segment.batches(chunk_size=RECOVERY_CHUNK):
                if header.last_offset < start or header.is_control or header.is_transactional:
                    continue
                for record in decode_batch(view, max_decompressed=max_decompressed)[1]:
                    if record.key is not None and start <= record.offset < end:
                        offset_map[record.key] = record.offset
        return offset_map

    def write_cleaned(
        self,
        log: Log,
        group: Sequence[LogSegment],
        offset_map: Mapping[bytes, int],
        producer_last: Mapping[int, int],
        delete_horizon_ms: int,
        stats: CleanerStats,
        *,
        max_decompressed: int = MAX_DECOMPRESSED_BYTES,
        layout: list[tuple[int, BatchHeader]] | None = None,
    ) -> Path:
        """Write the group's retained batches to `<base>.log.cleaned`, fsynced; returns its path.
        Given `layout`, (position, header) of each batch written is appended to it."""
        path = Path(str(log_file(log.directory, group[0].base_offset)) + CLEANED_SUFFIX)
        try:
            self._write_cleaned(path, group, offset_map, producer_last, delete_horizon_ms, stats,
                                max_decompressed, [] if layout is None else layout)
        except BaseException:
            path.unlink(missing_ok=True)  # a half-written `.cleaned` file is worth nothing
            raise
        return path

    def _write_cleaned(
        self,
        path: Path,
        group: Sequence[LogSegment],
        offset_map: Mapping[bytes, int],
        producer_last: Mapping[int, int],
        delete_horizon_ms: int,
        stats: CleanerStats,
        max_decompressed: int,
        layout: list[tuple[int, BatchHeader]],
    ) -> None:
        out = _CleanedFile(path, self.disk)
        with out:
            for segment in group:
                drop_tombstones = segment.largest_timestamp() < delete_horizon_ms
                stats.bytes_read += segment.size
                for _, header, view in segment.batches(chunk_size=RECOVERY_CHUNK):
                    kept = self.filter_batch(
                        header, view, offset_map, producer_last, drop_tombstones, stats,
                        max_decompressed=max_decompressed,
                    )
                    if kept is not None:
                        layout.append((out.position, BatchHeader(
                            *HEADER_STRUCT.unpack_from(kept, 0))))
                        out.write(kept)
                        stats.bytes_written += len(kept)
            out.sync()

    @staticmethod
    def filter_batch(
        header: BatchHeader,
        view: memoryview,
        offset_map: Mapping[bytes, int],
        producer_last: Mapping[int, int],
        drop_tombstones: bool,
        stats: CleanerStats,
        *,
        max_decompressed: int = MAX_DECOMPRESSED_BYTES,
    ) -> bytes | None:
        """The batch as it is, re-encoded with fewer records, an empty batch, or None (dropped)."""
        if header.is_control or header.is_transactional:
            stats.records_read += header.record_count
            stats.records_kept += header.record_count
            return bytes(view)
        records = decode_batch(view, max_decompressed=max_decompressed)[1]
        kept = []
        for record in records:
            if record.key is not None and offset_map.get(record.key, -1) > record.offset:
                continue  # a later record of the same key exists
            if record.key is not None and record.value is None and drop_tombstones:
                stats.tombstones_removed += 1
                continue
            kept.append(record)
        stats.records_read += len(records)
        stats.records_kept += len(kept)
        if len(kept) == len(records):
            return bytes(view)
        if kept:
            return rebuild_batch(header, kept)
        if header.producer_id >= 0 and producer_last.get(header.producer_id) == header.last_offset:
            stats.empty_batches_kept += 1
            return rebuild_batch(header, [])
        return None



class _CleanedFile:
    """The `.cleaned` output, written in pieces of about 1 MiB through the dir's injected faults
    (cleaner kind), so that a failing disk fails the cleaner too."""

    FLUSH_BYTES = 1 << 20

    def __init__(self, path: Path, disk: DiskFaults) -> None:
        self._disk = disk
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._pending: list[bytes] = []
        self._size = 0
        self.position = 0  # bytes written so far, pending included

    def __enter__(self) -> _CleanedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def write(self, data: bytes) -> None:
        self._pending.append(data)
        self._size += len(data)
        self.position += len(data)
        if self._size >= self.FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._disk.write_all(self._fd, b"".join(self._pending), FileKind.CLEANER)
            self._pending, self._size = [], 0

    def sync(self) -> None:
        self._flush()
        self._disk.fsync(self._fd, FileKind.CLEANER)
