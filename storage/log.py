"""Log: one partition's folder of segments; appends, reads, retention and truncation (loading and
crash recovery are in storage/log_loader.py).

Offsets: log start offset <= high watermark <= log end offset (the next offset to assign). Everything
below the recovery point is known to be flushed; recovery scans only from the segment holding it.
Single-threaded by design (the broker's event loop owns it), so there are no locks; fsyncs (at roll,
flush, truncation) and checkpoint writes go to the LogManager's flusher, a worker thread, and the
recovery point moves only once such a flush has completed.
The leader epoch cache mirrors the batches' partitionLeaderEpoch; every append, truncation and
retention step keeps it so (see storage/leader_epoch_cache.py). Producer state checks idempotent
leader appends, records follower appends, is snapshotted at roll and close and rebuilt after a
truncation (see storage/producer_state.py).
"""

from __future__ import annotations

import bisect
import functools
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from protocol.errors import ErrorCode, KafkaError, RecordValidationError
from protocol.records import (
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    MAGIC_V2,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    RecordsSummary,
    assign_offsets,
    batch_crc_ok,
    decode_batch,
    decompression_limit,
    iter_batches,
    read_batch_header,
    recompress_batch,
    set_max_timestamp,
    validate_produce_records,
    walk_records,
)
from storage.append_origin import AppendOrigin
from storage.checkpoint import fsync_path
from storage.disk_faults import DiskFaults, file_kind
from storage.file_handles import FileHandleCache
from storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT,
    LeaderEpochCheckpointFile,
    LeaderEpochFileCache,
)
from storage.log_config import DEFAULT_PRODUCER_ID_EXPIRATION_MS, INT_MAX, LONG_MAX, LogConfig
from storage.log_dir_failure_channel import KafkaStorageError, LogDirFailureChannel
from storage.log_flusher import Job, LogFlusher
from storage.log_info import FetchDataInfo, LogAppendInfo, LogOffsetMetadata
from storage.log_loader import load_segments, new_segment
from storage.naming import DELETE_SUFFIX, log_file, moved_dir_name
from storage.producer_state import (
    BatchMetadata,
    CompletedTxn,
    EndTxnMarker,
    ProducerStateManager,
    duplicate_append_info,
    end_txn_marker,
)
from storage.segment import (
    RECOVERY_CHUNK,
    LogSegment,
    first_record_at_or_after,
    offset_of_max_timestamp,
)
from storage.transaction_index import AbortedTxn


class UnexpectedAppendOffsetError(KafkaError):
    """A follower tried to append batches below the log end offset."""

    def __init__(self, message: str, first_offset: int, log_end_offset: int) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


P = ParamSpec("P")
R = TypeVar("R")


def _handling_io_errors(
    what: str,
) -> Callable[[Callable[Concatenate[Log, P], R]], Callable[Concatenate[Log, P], R]]:
    """Kafka's maybeHandleIOException around a Log method: refused at once on an offline log
    dir; an OSError inside takes the dir offline and becomes KafkaStorageError."""
    def wrap(method: Callable[Concatenate[Log, P], R]) -> Callable[Concatenate[Log, P], R]:
        @functools.wraps(method)
        def run(self: Log, *args: P.args, **kwargs: P.kwargs) -> R:
            if self.failure_channel.is_offline(self.log_dir):
                raise KafkaStorageError(f"Error while {what} {self.directory.name}: "
                                        f"log dir {self.log_dir} is offline")
            try:
                return method(self, *args, **kwargs)
            except OSError as exc:
                if self.deleted:  # its folder went under it (a replica move abandoned): no disk fault
                    raise KafkaStorageError(
                        f"Error while {what} {self.directory.name}: the log was deleted") from exc
                raise self.failure_channel.storage_error(
                    self.log_dir, f"{what} {self.directory.name}", exc) from exc
        return run
    return wrap


class Log:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        now_ms: Callable[[], int],
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        *,
        clean_shutdown: bool = True,
        disk: DiskFaults | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        files: FileHandleCache | None = None,
        flusher: LogFlusher | None = None,
        fresh: bool = False,
    ) -> None:
        self.directory = directory
        # Kafka's maybeHandleIOException: an OSError here takes the whole log dir offline.
        self.log_dir = str(directory.parent)
        self.disk = disk
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.config = config
        self._now_ms = now_ms
        self._files = FileHandleCache() if files is None else files
        self._flusher = flusher or LogFlusher(threaded=False)
        self.deleted = False
        # `.swap` files of a cleaner pass whose rename is being fsynced (see abandon_pending_swaps).
        self.pending_swaps: set[Path] = set()
        # A failed flush job leaves data whose fsync was handed over but not done: the recovery
        # point must not move past it again (the broker is told through the flusher's on_error).
        self.flush_failed = False
        # (truncations, offset) stored by the flusher's thread once everything below offset is
        # durable; applied to the recovery point unless the log was truncated since.
        self._truncations = 0
        self._flushed = (0, -1)
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_end_offset = segments[-1].next_offset
        self._log_start_offset = min(
            max(log_start_offset, segments[0].base_offset), self._log_end_offset
        )
        self._recovery_point = min(
            max(recovery_point, self._log_start_offset), self._log_end_offset
        )
        self._high_watermark = self._log_start_offset
        # Called once what a fetch of this log is answered may have changed (log start, log end,
        # high watermark; the last stable offset moves only with those): the broker's fetch
        # sessions read only the partitions that changed since their last fetch.
        self.on_change: Callable[[], None] | None = None
        for segment in segments[:-1]:
            segment.release_file()  # loading read them; idle inactive segments hold no descriptor
        self.producer_state = ProducerStateManager(
            directory, now_ms=now_ms, producer_id_expiration_ms=producer_id_expiration_ms
        )
        if fresh:  # a folder just made: no checkpoint, no snapshot to read
            self.leader_epoch_cache = LeaderEpochFileCache(
                LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT, disk),
                submit=self._submit)
            return
        self.leader_epoch_cache = self._load_leader_epoch_cache()
        self._reload_producer_state(None if clean_shutdown else self._recovery_point)

    # -- opening and recovery ----------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: Callable[[], int],
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        disk: DiskFaults | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        files: FileHandleCache | None = None,
        flusher: LogFlusher | None = None,
    ) -> Log:
        """A new log: its folder made (FileExistsError when there is one: open that instead) with
        one empty segment, and nothing to read or recover (thousands are made at once)."""
        directory.mkdir()
        segment = new_segment(directory, config, 0, disk, files, fresh=True)
        return cls(directory, config, now_ms, [segment], 0, 0, producer_id_expiration_ms,
                   disk=disk, failure_channel=failure_channel, files=files, flusher=flusher,
                   fresh=True)

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: Callable[[], int],
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clean_shutdown: bool = False,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        disk: DiskFaults | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        files: FileHandleCache | None = None,
        flusher: LogFlusher | None = None,
    ) -> Log:
        """Load every segment; after an unclean shutdown scan those at/after the recovery point."""
        directory = Path(directory)
        files = FileHandleCache() if files is None else files
        segments = load_segments(directory, config, recovery_point, clean_shutdown,
                                 log_start_offset or 0, disk, files)
        log = cls(
            directory, config, now_ms, segments,
            segments[0].base_offset if log_start_offset is None else log_start_offset,
            recovery_point, producer_id_expiration_ms, clean_shutdown=clean_shutdown, disk=disk,
            failure_channel=failure_channel, files=files, flusher=flusher,
        )  # fmt: skip
        # Indexes rebuilt by recovery are fsynced by the flusher, not by the loading thread.
        rebuilt = [path for segment in log._segments if segment.indexes_unsynced
                   for path in segment.prepare_flush()]
        if rebuilt:
            log._submit(functools.partial(log._fsync_all, rebuilt))
        if not clean_shutdown:
            # What recovery kept is made durable; then the recovery point moves to the LEO.
            log.flush_in_background()
        active = log.active_segment
        first = active.first_batch_header()
        if first is not None:
            active.rolling_base_ms = first.max_timestamp if first.max_timestamp >= 0 else now_ms()
        return log

    # -- properties ----------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        old, self._high_watermark = self._high_watermark, min(
            max(offset, self._log_start_offset), self._log_end_offset)
        self.producer_state.on_high_watermark_updated(self._high_watermark)
        if self._high_watermark != old:
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed consumers stop: the first offset of the oldest undecided
        transaction, or the high watermark when that is lower (Kafka's LSO)."""
        unstable = self.producer_state.first_unstable_offset()
        if unstable is not None and unstable < self._high_watermark:
            return unstable
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        truncations, offset = self._flushed
        if truncations == self._truncations and offset > self._recovery_point:
            self._recovery_point = min(offset, self._log_end_offset)
        return self._recovery_point

    @property
    def files(self) -> FileHandleCache:
        """The descriptor cache its segments open files through."""
        return self._files

    def adopt_files(self, files: FileHandleCache) -> None:
        """Open its segment files through `files` from now on (a log opened in a worker thread,
        with a cache of its own, joins the cache of the thread that owns the logs)."""
        for segment in self._segments:
            segment.move_file_to(files)
        self._files = files

    @property
    def truncations(self) -> int:
        """How many times it was truncated (a copy of it must start again when this moves)."""
        return self._truncations

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> Sequence[LogSegment]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    # -- appends -------------------------------------------------------------------------------------

    @property
    def is_compacted(self) -> bool:
        return "compact" in self.config.cleanup_policy.split(",")

    @_handling_io_errors("appending to log")
    def append_as_leader(
        self, records: bytes | memoryview, leader_epoch: int, *,
        checked: CheckedRecords | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Validate a producer's batches, assign offsets from the LEO, stamp the epoch and each
        batch's max timestamp, append.

        `checked`: what check_batches_records returned for these very bytes, run by the caller
        (in a worker thread: decompressing, reading and recompressing a batch's records can take
        long), so they are not read again here. Control batches (transaction markers) come only
        from the coordinator."""
        max_message_bytes = self.config.max_message_bytes
        headers = validate_produce_records(records, max_message_bytes)
        markers = _markers(records, headers, origin)
        now = self._now_ms()
        if origin == AppendOrigin.CLIENT:
            _check_client_batches(headers, self.directory.name)
        if checked is None:
            checked = read_records(records, headers, max_message_bytes,
                                   self.record_checks(now) if self.decodes_produced_records
                                   else None, self.config.compression_target)
        if origin == AppendOrigin.CLIENT:  # after the counts: they bound its record errors
            _check_claimed_append_time(headers, self.config.log_append_time)
        if checked.records is not records:  # rebuilt (MESSAGE_TOO_LARGE if it grew past the
            # limit), or a cut batch after the whole ones left out
            records = checked.records
            headers = validate_produce_records(records, max_message_bytes)
        max_timestamps = checked.max_timestamps
        buf = bytearray(records)
        self._check_fits_segment(len(buf))
        append_time = self.config.log_append_time
        first_offset = offset = self._log_end_offset
        max_ts, offset_of_max, num_records = -1, -1, 0
        batches: list[tuple[int, BatchHeader]] = []
        pos = 0
        pending = self.producer_state.validate(headers, first_offset, now if append_time else None,
                                               markers, origin == AppendOrigin.CLIENT)
        if isinstance(pending, BatchMetadata):  # a retry of a batch already here: write nothing
            return duplicate_append_info(pending, append_time)
        for header, records_max in zip(headers, max_timestamps, strict=True):
            assign_offsets(buf, pos, offset, leader_epoch)
            header.base_offset, header.partition_leader_epoch = offset, leader_epoch
            if append_time:
                set_max_timestamp(buf, pos, LOG_APPEND_TIME, now)
                header.max_timestamp = now
                header.attributes |= TIMESTAMP_TYPE_MASK
            elif header.max_timestamp != records_max or header.timestamp_type != CREATE_TIME:
                # Kafka's LogValidator: a CreateTime batch's max is its records', not the header's
                set_max_timestamp(buf, pos, CREATE_TIME, records_max)
                header.max_timestamp = records_max
                header.attributes &= ~TIMESTAMP_TYPE_MASK
            if header.max_timestamp > max_ts:
                # With LogAppendTime every record has the max, so the first offset holds it.
                max_ts = header.max_timestamp
                offset_of_max = first_offset if append_time else header.last_offset
            batches.append((pos, header))
            num_records += header.record_count
            pos += header.size
            offset = header.next_offset
        # Before the write, as Kafka: a crash in between leaves an entry at the LEO, dropped on load.
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        self._append(buf, batches, now)
        self._on_transactions_completed(self.producer_state.commit(pending))
        return LogAppendInfo(
            first_offset=first_offset,
            last_offset=offset - 1,
            log_append_time=now if append_time else -1,
            max_timestamp=max_ts,
            offset_of_max_timestamp=offset_of_max,
            valid_bytes=len(buf),
            num_records=num_records,
        )

    @_handling_io_errors("appending to log")
    def append_as_follower(self, records: bytes | memoryview) -> LogAppendInfo | None:
        """Append a leader's batches as they are (offsets included); they must start at/after the LEO."""
        buf = bytes(records)
        batches: list[tuple[int, BatchHeader]] = []
        expected = self._log_end_offset
        end = 0
        for pos, header in iter_batches(buf):
            if header.magic != MAGIC_V2 or not batch_crc_ok(buf, pos, header):
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"bad magic or CRC at position {pos}")
            if header.base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"batch at offset {header.base_offset} is below {expected}",
                    header.base_offset, self._log_end_offset,
                )  # fmt: skip
            batches.append((pos, header))
            expected, end = header.next_offset, pos + header.size
        if not batches:
            return None
        buf = buf[:end]  # a torn trailing batch from a size-limited fetch is left for the next one
        self._check_fits_segment(len(buf))
        now = self._now_ms()
        for _, header in batches:
            if header.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        self._append(buf, batches, now)
        view = memoryview(buf)
        self._on_transactions_completed(self.producer_state.update(
            (h, view[pos : pos + h.size]) for pos, h in batches))
        max_header = max((h for _, h in batches), key=lambda h: h.max_timestamp)
        return LogAppendInfo(
            first_offset=batches[0][1].base_offset,
            last_offset=expected - 1,
            log_append_time=-1,
            max_timestamp=max_header.max_timestamp,
            offset_of_max_timestamp=max_header.last_offset,
            valid_bytes=len(buf),
            num_records=sum(h.record_count for _, h in batches),
        )

    @property
    def decodes_produced_records(self) -> bool:
        """Whether a producer's records are decoded to be checked one by one: keys on a compacted
        topic, timestamps when a CreateTime topic bounds them (Kafka's LogValidator)."""
        return self.is_compacted or (
            not self.config.log_append_time
            and min(self.config.timestamp_before_max_ms, self.config.timestamp_after_max_ms) < LONG_MAX)

    def checks_off_loop(self, records: bytes | memoryview) -> bool:
        """Whether checking these Produce records for this log is worth a worker thread."""
        return check_off_loop(records, self.decodes_produced_records,
                              self.config.compression_target)

    def records_checker(self) -> Callable[[bytes], CheckedRecords]:
        """check_batches_records bound to this log's limits and record checks as they are now, to
        run in a worker thread (append_as_leader takes what it found as `checked`)."""
        max_bytes, target = self.config.max_message_bytes, self.config.compression_target
        checks = self.record_checks() if self.decodes_produced_records else None
        return lambda records: check_batches_records(records, max_bytes, checks, target)

    def record_checks(self, now: int | None = None) -> RecordChecks:
        now = self._now_ms() if now is None else now
        bounded = not self.config.log_append_time and min(
            self.config.timestamp_before_max_ms, self.config.timestamp_after_max_ms) < LONG_MAX
        return RecordChecks(
            topic_partition=self.directory.name,
            compacted=self.is_compacted,
            timestamp_bounds=((now, self.config.timestamp_before_max_ms,
                               self.config.timestamp_after_max_ms) if bounded else None),
        )

    def _check_fits_segment(self, size: int) -> None:
        if size > self.config.segment_bytes:
            raise KafkaError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"{size} bytes of records exceed segment.bytes {self.config.segment_bytes}",
            )

    def _append(
        self, buf: bytes | bytearray, batches: list[tuple[int, BatchHeader]], now: int
    ) -> None:
        last_offset = batches[-1][1].last_offset
        if self._should_roll(len(buf), now, last_offset):
            self.roll()
        self.active_segment.append(buf, batches, now)
        self._log_end_offset = batches[-1][1].next_offset
        self._changed()

    def _should_roll(self, size: int, now: int, last_offset: int) -> bool:
        active = self.active_segment
        if active.size == 0:
            return False
        return (
            active.size + size > self.config.segment_bytes
            or (
                active.rolling_base_ms is not None
                and now - active.rolling_base_ms > self.config.segment_ms
            )
            or active.offset_index.is_full
            or active.time_index.is_full
            or last_offset - active.base_offset > INT_MAX  # relative offsets are int32
        )

    @_handling_io_errors("rolling log")
    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op when the active one is empty).

        As Kafka, the old segment is flushed by the flusher, and the recovery point moves to the
        new segment's base once it has been; the producer snapshot is written after it."""
        active = self.active_segment
        if active.size == 0:
            return active
        active.seal()
        paths = active.prepare_flush()
        active.release_file()  # an inactive segment holds no descriptor until it is read again
        segment = new_segment(self.directory, self.config, self._log_end_offset, self.disk,
                              self._files)
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._flush_paths([*paths, self.directory], segment.base_offset)
        self.producer_state.take_snapshot(self._log_end_offset, self._submit)
        return segment

    def replace_segments(self, old: Sequence[LogSegment], swap: Path,
                         layout: Sequence[tuple[int, BatchHeader]] | None = None) -> LogSegment:
        """The log cleaner's last step: the complete `.swap` file (its rename already fsynced by
        the cleaner) takes the place of `old`, adjacent inactive segments, under the first one's
        base offset. Sources go first, then the rename: a crash in between is finished on load
        (storage/log_loader.py finish_swap). The folder and index fsyncs go to the flusher.
        `layout`, the cleaner's (position, header) of each batch it wrote, spares reading the
        file back to index it."""
        i = self._segments.index(old[0])
        base = old[0].base_offset
        aborted = [txn for segment in old for txn in segment.txn_index]
        for segment in old:
            segment.delete()
        swap.replace(log_file(self.directory, base))
        self.pending_swaps.discard(swap)
        segment = new_segment(self.directory, self.config, base, self.disk, self._files)
        if layout is None or not segment.index_layout(layout):
            segment.recover()  # indexes rebuilt from the cleaned batches, read back
        for txn in aborted:  # the cleaner keeps markers: read_committed still needs the aborts
            segment.txn_index.append(txn)
        segment.seal()
        paths = [self.directory, *segment.prepare_flush()]
        segment.release_file()
        self._segments[i : i + len(old)] = [segment]
        self._bases[i : i + len(old)] = [base]
        self._submit(functools.partial(self._fsync_all, paths))
        return segment

    def abandon_pending_swaps(self) -> None:
        """Before the log's segments change under a cleaner pass waiting on its `.swap` files'
        fsync: those files go now, so that a crash cannot finish a swap over the changed log
        (the cleaner sees the change and drops its pass)."""
        for swap in self.pending_swaps:
            swap.unlink(missing_ok=True)
        self.pending_swaps.clear()

    # -- reads ---------------------------------------------------------------------------------------

    @_handling_io_errors("reading log")
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        as_region: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one holding fetch_offset, up to max_bytes, none at/after max_offset.

        With min_one_message the first batch comes back even when larger than max_bytes (KIP-74).
        `as_region`: the records as a FileRegion of the segment file (sent from there), not read.
        """
        if fetch_offset < self._log_start_offset or fetch_offset > self._log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {fetch_offset} outside [{self._log_start_offset}, {self._log_end_offset}]",
            )
        if fetch_offset == self._log_end_offset or (
            max_offset is not None and fetch_offset >= max_offset
        ):
            return FetchDataInfo(fetch_offset, b"")
        i = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        for segment in self._segments[i:]:
            found = segment.read(fetch_offset, max_bytes, max_offset, min_one_message, as_region)
            if found is not None:
                data, position = found
                return FetchDataInfo(fetch_offset, data, segment.base_offset, position)
        return FetchDataInfo(fetch_offset, b"")

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where `offset` lies (Kafka's convertToOffsetMetadata): the log end offset at the active
        segment's end, any other at its batch's position; an offset no segment holds (below the log
        start) at the first segment's start. Recent batches are found without an index lookup."""
        active = self._segments[-1]
        if offset >= self._log_end_offset:
            return LogOffsetMetadata(offset, active.base_offset, active.size)
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for segment in self._segments[i:]:
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found[0])
        first = self._segments[0]
        return LogOffsetMetadata(offset, first.base_offset, 0)

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        """Whole batches from the log start to the log end offset as of the call, at most
        `chunk_bytes` at a time (one batch when larger), each read as it is iterated: how a
        coordinator loads the partition of its internal topic."""
        position, end = self._log_start_offset, self._log_end_offset
        while position < end:
            data = self.read(position, chunk_bytes, max_offset=end).records
            last = None
            for _, header in iter_batches(data):
                last = header
            if last is None:
                return
            position = last.next_offset
            yield data

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`, or None."""
        limit = decompression_limit(self.config.max_message_bytes)
        from_offset = self._log_start_offset
        while (candidate := self.timestamp_candidate(timestamp, from_offset)) is not None:
            header, batch = candidate
            found = first_record_at_or_after(batch, timestamp, self._log_start_offset, limit)
            if found is not None:
                return found
            from_offset = header.next_offset
        return None

    def timestamp_candidate(
        self, timestamp: int, from_offset: int
    ) -> tuple[BatchHeader, bytes] | None:
        """The first batch at/after `from_offset` that may hold a record with timestamp >=
        `timestamp`, as bytes of its own, or None. Searching by offset rather than by position
        keeps the walk valid when the caller awaits between two steps (the ReplicaManager decodes
        a compressed batch in a worker thread) while the log rolls, truncates or is cleaned."""
        from_offset = max(from_offset, self._log_start_offset)
        for segment in self._segments:
            if segment.next_offset <= from_offset or segment.max_timestamp < timestamp:
                continue
            for header, view in segment.timestamp_candidates(timestamp, from_offset):
                return header, bytes(view)
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp in the log, or None
        (ListOffsets MAX_TIMESTAMP, as Kafka's fetchOffsetByTimestamp)."""
        candidate = self.max_timestamp_candidate()
        if candidate is None:
            return None
        header, batch = candidate
        offset = offset_of_max_timestamp(batch, decompression_limit(self.config.max_message_bytes))
        return None if offset is None else (offset, header.max_timestamp)

    def max_timestamp_candidate(self) -> tuple[BatchHeader, bytes] | None:
        """The batch holding the log's largest timestamp (the first segment with the largest
        max timestamp, its first batch with it), as bytes of its own, or None."""
        best = max(self._segments, key=lambda s: s.max_timestamp)
        found = best.max_timestamp_batch()
        return None if found is None else (found[0], bytes(found[1]))

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; (-1, -1) when unknown (Kafka's rules)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    # -- leader epoch cache --------------------------------------------------------------------------

    def _load_leader_epoch_cache(self) -> LeaderEpochFileCache:
        last = next((s for s in reversed(self._segments) if s.size > 0), None)
        found = last.translate_offset(last.next_offset - 1) if last is not None else None
        return LeaderEpochFileCache.load(
            self.directory,
            submit=self._submit,
            disk=self.disk,
            log_start_offset=self._log_start_offset,
            log_end_offset=self._log_end_offset,
            last_batch=found and (found[1].partition_leader_epoch, found[1].base_offset),
            scan=lambda: (
                (h.partition_leader_epoch, h.base_offset)
                for segment in self._segments
                for _, h, _ in segment.batches(chunk_size=RECOVERY_CHUNK)
            ),
        )

    # -- producer state ------------------------------------------------------------------------------

    def _reload_producer_state(self, max_snapshot_offset: int | None = None) -> None:
        self._on_transactions_completed(self.producer_state.truncate_and_reload(
            self._log_start_offset, self._log_end_offset, self._batches_from, max_snapshot_offset
        ))
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def _batches_from(self, offset: int) -> Iterator[tuple[BatchHeader, memoryview]]:
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for segment in self._segments[i:]:
            start = segment.offset_index.lookup(offset)[1] if segment.base_offset <= offset else 0
            for _, header, view in segment.batches(start, chunk_size=RECOVERY_CHUNK):
                yield header, view

    # -- transactions --------------------------------------------------------------------------------

    def _on_transactions_completed(self, completed: list[CompletedTxn]) -> None:
        """An aborted transaction goes into the index of the segment holding its marker (again
        after a crash lost the entry: a replayed marker already indexed is skipped)."""
        for txn in completed:
            if not txn.is_aborted:
                continue
            segment = self._segments[max(bisect.bisect_right(self._bases, txn.last_offset) - 1, 0)]
            last = segment.txn_index.last_offset
            if last is None or txn.last_offset > last:
                segment.txn_index.append(AbortedTxn(
                    txn.producer_id, txn.first_offset, txn.last_offset,
                    self.producer_state.last_stable_offset_of(txn)))

    def aborted_transactions_in(self, fetch_offset: int, records: bytes | memoryview
                                ) -> list[AbortedTxn]:
        """The aborted transactions a read_committed consumer needs for records read from
        `fetch_offset`: those overlapping [fetch_offset, the offset after the last batch read)."""
        upper = fetch_offset
        for _, header in iter_batches(records):
            upper = header.next_offset
        return self.collect_aborted_transactions(fetch_offset, upper) if upper > fetch_offset \
            else []

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), for a
        read_committed Fetch (the client drops their records)."""
        found: list[AbortedTxn] = []
        i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
        for segment in self._segments[i:]:
            txns, complete = segment.txn_index.collect_aborted(start_offset, upper_bound_offset)
            found += txns
            if complete or segment.base_offset >= upper_bound_offset:
                break
        return found

    # -- retention and truncation -------------------------------------------------------------------

    @_handling_io_errors("deleting segments of log")
    def delete_old_segments(self) -> int:
        """Apply retention.ms, then retention.bytes; returns how many segments were deleted.

        As in Kafka, only segments wholly below the high watermark are eligible, and an empty active
        segment is never deleted; a non-empty active one is rolled first.
        """
        if "delete" not in self.config.cleanup_policy.split(","):
            return 0  # compacted topics keep their segments (storage/log_cleaner.py compacts them)
        deleted = 0
        if self.config.retention_ms >= 0:
            now = self._now_ms()
            limit = self.config.retention_ms
            deleted += self._delete_while(lambda s: now - s.largest_timestamp() > limit)
        if self.config.retention_bytes >= 0:
            excess = self.size_in_bytes - self.config.retention_bytes

            def over_size(segment: LogSegment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_while(over_size)
        return deleted

    def _delete_while(self, predicate: Callable[[LogSegment], bool]) -> int:
        doomed: list[LogSegment] = []
        for i, segment in enumerate(self._segments):
            is_last = i == len(self._segments) - 1
            upper = self._log_end_offset if is_last else self._segments[i + 1].base_offset
            if (
                upper > self._high_watermark
                or (is_last and segment.size == 0)
                or not predicate(segment)
            ):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        self.abandon_pending_swaps()
        if len(doomed) == len(self._segments):
            self.roll()  # keep an (empty) active segment at the log end offset
        del self._segments[: len(doomed)]
        del self._bases[: len(doomed)]
        for segment in doomed:
            segment.delete()
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._high_watermark = max(self._high_watermark, self._log_start_offset)
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self.producer_state.delete_snapshots_before(self._log_start_offset)
        self._changed()
        return len(doomed)

    @_handling_io_errors("deleting records of log")
    def increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords, and followers following their leader (Kafka's maybeIncrementLogStartOffset):
        move the log start offset up to `offset` (at most the high watermark) and delete the segments
        wholly below it through the retention path. True when it moved."""
        if offset > self._high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is above the high watermark {self._high_watermark}")
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        self._delete_while(lambda s: s.next_offset <= offset)
        self._recovery_point = max(self._recovery_point, offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.delete_snapshots_before(offset)
        self._changed()
        return True

    @_handling_io_errors("truncating log")
    def truncate_to(self, offset: int) -> bool:
        """Remove everything from `offset` on (a follower after a leader change). True if changed.

        A batch holding `offset` goes whole, so the log end offset can end below `offset`.
        """
        if offset >= self._log_end_offset:
            return False
        self.abandon_pending_swaps()
        if offset <= self._segments[0].base_offset or offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
            self._bases.pop()
        self._truncations += 1  # a flush in flight no longer speaks for the offsets it covered
        active = self.active_segment
        active.truncate_to(offset)
        self._log_end_offset = active.next_offset
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        # The LEO, not `offset`: the batch holding `offset` went whole.
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        self._reload_producer_state()
        self._changed()
        return True

    @_handling_io_errors("truncating log")
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at `offset`."""
        self.abandon_pending_swaps()
        for segment in self._segments:
            segment.delete()
        self._segments = [new_segment(self.directory, self.config, offset, self.disk,
                                      self._files)]
        self._bases = [offset]
        self._truncations += 1
        self._submit(lambda: fsync_path(self.directory))
        self._log_start_offset = self._log_end_offset = offset
        self._high_watermark = self._recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)
        self._changed()

    # -- durability and lifecycle ---------------------------------------------------------------------

    @_handling_io_errors("flushing log")
    def flush(self) -> None:
        """fsync every segment with unflushed data; the recovery point becomes the log end offset.
        On the caller's thread: for shutdown and tools (the broker uses flush_in_background)."""
        for segment in self._segments:
            segment.flush()
        self._recovery_point = self._log_end_offset

    @_handling_io_errors("flushing log")
    def flush_in_background(self) -> None:
        """flush() with the fsyncs run by the flusher; the recovery point moves once they ran."""
        if self.recovery_point >= self._log_end_offset:
            return
        i = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        paths = [path for segment in self._segments[i:] for path in segment.prepare_flush()]
        self._flush_paths(paths, self._log_end_offset)

    def _flush_paths(self, paths: list[Path] | Callable[[], list[Path]], upto: int) -> None:
        """fsync `paths` in the flusher (given as a function, it runs there first to name them),
        then let the recovery point move to `upto`."""
        truncations = self._truncations

        def job() -> None:
            self._fsync_all(paths() if callable(paths) else paths)
            if not self.flush_failed:
                self._flushed = (truncations, upto)  # one assignment: read whole by the log's thread

        self._submit(job)

    def _fsync_all(self, paths: list[Path]) -> None:
        for path in paths:
            if self.disk is not None:
                self.disk.fsync_path(path, file_kind(path))  # where an armed fsync fault fires
            else:
                fsync_path(path)

    def _submit(self, job: Job) -> None:
        """Hand a durability job to the flusher; it does nothing once the log is deleted."""

        def unless_deleted() -> None:
            if self.deleted:
                return
            try:
                job()
            except FileNotFoundError as exc:
                if not self.deleted:  # else the folder went while the job ran
                    self.flush_failed = True
                    raise self.failure_channel.storage_error(
                        self.log_dir, f"flushing log {self.directory.name}", exc) from exc
            except OSError as exc:  # Kafka's flush: an I/O error takes the log dir offline
                self.flush_failed = True
                raise self.failure_channel.storage_error(
                    self.log_dir, f"flushing log {self.directory.name}", exc) from exc
            except Exception:
                self.flush_failed = True
                raise

        self._flusher.submit(unless_deleted)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    def close_unflushed(self) -> None:
        """Close every segment without writing anything (its log dir went offline)."""
        for segment in self._segments:
            segment.close_unflushed()

    def close(self) -> None:
        self.producer_state.take_snapshot(self._log_end_offset)
        for segment in self._segments:
            segment.close()

    def close_in_background(self) -> None:
        """close() with its fsyncs and producer snapshot run by the flusher; the recovery point
        becomes the log end offset once they have run."""
        segments = list(self._segments)
        for segment in segments:
            segment.seal()
            segment.close_unflushed()  # only the descriptor: the flusher writes what is left
        # The index files (created now for segments that have none) are written in the flusher
        # too: a broker stop with thousands of segments does no file I/O on the loop.
        self._flush_paths(lambda: [p for s in segments for p in s.prepare_flush()],
                          self._log_end_offset)
        self.producer_state.take_snapshot(self._log_end_offset, self._submit)

    def delete(self) -> None:
        """Kafka's asyncDelete: the folder is renamed `-delete` now, so its name is free at once and
        a flush job running in it meanwhile cannot leave it behind, and the flusher removes it after
        the jobs queued before (the next load removes one a crash left)."""
        self.deleted = True  # the flusher skips this log's queued jobs
        self.abandon_pending_swaps()
        for segment in self._segments:
            segment.close_unflushed()
        doomed = self.directory.with_name(moved_dir_name(self.directory.name, DELETE_SUFFIX))
        try:
            self.directory.rename(doomed)
        except OSError:  # gone already, or its dir failed: whatever is left is removed in place
            doomed = self.directory
        self._flusher.submit(functools.partial(shutil.rmtree, doomed, ignore_errors=True))


# A Produce batch for a compacted topic that is compressed, or larger than this, is decoded in a
# worker thread rather than on the event loop (broker/replication/replica_manager.py).
DECODE_OFF_LOOP_BYTES = 64 * 1024


# Records whose structure append_as_leader walks on the loop (each record's lengths and counts,
# ~1-1.5 us a record); a request with more has them walked in a worker thread
COUNT_OFF_LOOP_RECORDS = 2048


def check_off_loop(records: bytes | memoryview, decodes: bool,
                   compression_target: tuple[int, int | None] | None = None) -> bool:
    """Whether checking these Produce records is worth a worker thread: a compressed batch
    (inflated first) or one to compress (the topic's codec is not its own), or, when every
    record is decoded (`decodes`: keys, timestamps) a large request, else one of many records
    (their structure walked)."""
    if decodes and len(records) > DECODE_OFF_LOOP_BYTES:
        return True
    n, pos, count = len(records), 0, 0
    while n - pos >= HEADER_SIZE:
        header = read_batch_header(records, pos)
        count += header.record_count
        if header.compression or (not decodes and count > COUNT_OFF_LOOP_RECORDS) or (
                compression_target is not None and compression_target[0] != header.compression):
            return True
        if header.size <= 0:
            break
        pos += header.size
    return False


def _markers(records: bytes | memoryview, headers: list[BatchHeader], origin: AppendOrigin
             ) -> list[EndTxnMarker | None] | None:
    """Per batch, the transaction marker a control batch carries; clients may not send any."""
    if not any(h.is_control for h in headers):
        return None
    if origin != AppendOrigin.COORDINATOR:
        raise KafkaError(ErrorCode.INVALID_RECORD, "clients may not write control records")
    markers: list[EndTxnMarker | None] = []
    pos = 0
    for header in headers:
        markers.append(end_txn_marker(header, memoryview(records)[pos : pos + header.size])
                       if header.is_control else None)
        pos += header.size
    return markers


def _check_client_batches(headers: list[BatchHeader], topic_partition: str) -> None:
    """Kafka's LogValidator on a client's batch, before its records: it starts at offset 0 (the
    log assigns offsets), and a producer id comes with a sequence."""
    for header in headers:
        if header.base_offset != 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, (
                f"The baseOffset of the record batch in the append to {topic_partition} should "
                f"be 0, but it is {header.base_offset}"))
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, (
                f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                f"{header.producer_id} in topic partition {topic_partition}."))


def _check_claimed_append_time(headers: list[BatchHeader], log_append_time: bool) -> None:
    """A client's batch does not claim a LogAppendTime the topic would not give it (Kafka's
    LogValidator.validateTimestamp): every record of it refused."""
    for header in headers:
        if header.timestamp_type == LOG_APPEND_TIME and (
                log_append_time or header.max_timestamp == NO_TIMESTAMP):
            # Kafka names each record with its sizes; the batch is not inflated here to say so.
            raise RecordValidationError(
                ErrorCode.INVALID_TIMESTAMP,
                "One or more records have been rejected due to invalid timestamp",
                [(index, f"Invalid timestamp type in message with offset {index}. Producer "
                         "should not set timestamp type to LogAppendTime.")
                 for index in range(header.record_count)])


@dataclass(frozen=True, slots=True)
class RecordChecks:
    """What Kafka's LogValidator checks record by record on a leader's append."""

    topic_partition: str  # "topic-0", as Kafka's messages print it
    compacted: bool  # every record needs a key
    # CreateTime topics with bounds: (now, before max ms, after max ms); else None.
    timestamp_bounds: tuple[int, int, int] | None


@dataclass(slots=True)
class CheckedRecords:
    """A producer's records once read: the bytes to append (batches rebuilt where the topic's
    compression.type or their inner offsets ask it) and each batch's records' max timestamp."""
    records: bytes | memoryview
    max_timestamps: list[int]


def check_batches_records(records: bytes, max_message_bytes: int, checks: RecordChecks | None,
                          compression_target: tuple[int, int | None] | None) -> CheckedRecords:
    """What append_as_leader checks and rebuilds of a producer's records, as a function of the
    bytes alone, so that it may run in a worker thread."""
    return read_records(records, validate_produce_records(records, max_message_bytes),
                        max_message_bytes, checks, compression_target)


def read_records(records: bytes | memoryview, headers: list[BatchHeader], max_message_bytes: int,
                 checks: RecordChecks | None,
                 compression_target: tuple[int, int | None] | None) -> CheckedRecords:
    """Every record read, as Kafka's LogValidator reads them: decoded when the log checks keys or
    timestamps (`checks`), else its structure walked, each batch's count checked against it.
    A batch is rebuilt (Kafka's buildRecordsAndAssignOffsets) when the topic's codec is not its
    own, or when it is compressed with inner offsets out of order."""
    limit = decompression_limit(max_message_bytes)
    summaries = (check_produced_records(records, headers, checks, limit) if checks is not None
                 else walk_batches_records(records, headers, limit))
    max_timestamps = [summary.max_timestamp for summary in summaries]
    if compression_target is not None or any(h.compression for h in headers):
        rebuilt = _rebuilt(records, headers, summaries, compression_target, limit)
        if rebuilt is not None:
            return CheckedRecords(rebuilt, max_timestamps)
    valid = sum(header.size for header in headers)  # a batch cut short after them is left out
    return CheckedRecords(records if valid == len(records) else memoryview(records)[:valid],
                          max_timestamps)


def _rebuilt(records: bytes | memoryview, headers: list[BatchHeader],
             summaries: list[RecordsSummary], compression_target: tuple[int, int | None] | None,
             max_decompressed: int) -> bytes | None:
    """The batches with those to rebuild rebuilt; None when none is."""
    parts: list[bytes | memoryview] = []
    rebuilt, pos, view = False, 0, memoryview(records)
    for header, summary in zip(headers, summaries, strict=True):
        codec, level = (header.compression, None) if compression_target is None \
            else compression_target
        if not header.is_control and (codec != header.compression or (
                header.compression and not summary.offsets_in_order)):
            parts.append(recompress_batch(records, pos, codec, level, max_decompressed))
            rebuilt = True
        else:
            parts.append(view[pos : pos + header.size])
        pos += header.size
    return b"".join(parts) if rebuilt else None


def walk_batches_records(records: bytes | memoryview, headers: list[BatchHeader],
                         max_decompressed: int) -> list[RecordsSummary]:
    """Each batch holds the readable records it declares (Kafka's LogValidator reads them all):
    nothing of a batch whose count lies reaches the log."""
    pos, summaries = 0, []
    for header in headers:
        summaries.append(walk_records(records, pos, header, max_decompressed))
        pos += header.size
    return summaries


def _long(n: int) -> int:
    """n as a Java long prints it (Kafka's message wraps around past Long.MAX_VALUE)."""
    return (n + 2**63) % 2**64 - 2**63


def check_produced_records(
    records: bytes | memoryview, headers: list[BatchHeader], checks: RecordChecks,
    max_decompressed: int,
) -> list[RecordsSummary]:
    """Kafka's LogValidator.validateRecord per record: a key on a compacted topic, else a
    timestamp within the bounds. A batch with refused records fails as a whole with
    RecordValidationError naming them by index (KIP-467): INVALID_TIMESTAMP if any timestamp is
    out of range, else INVALID_RECORD with Kafka's summary of the first three."""
    pos, summaries = 0, []
    for header in headers:
        errors: list[tuple[int, str]] = []
        timestamp_refused = False
        decoded = decode_batch(records, pos, max_decompressed=max_decompressed)[1]
        summaries.append(RecordsSummary(
            max([NO_TIMESTAMP, *(r.timestamp for r in decoded)]),
            all(r.offset - header.base_offset == i for i, r in enumerate(decoded))))
        if not header.is_control:
            for index, record in enumerate(decoded):
                if checks.compacted and record.key is None:
                    errors.append((index, "Compacted topic cannot accept message without key in "
                                          f"topic partition {checks.topic_partition}"))
                elif checks.timestamp_bounds is not None and record.timestamp != NO_TIMESTAMP:
                    now, before, after = checks.timestamp_bounds
                    if now - record.timestamp > before or record.timestamp - now > after:
                        timestamp_refused = True
                        errors.append((index, f"Timestamp {record.timestamp} of message with "
                                              f"offset {record.offset} is out of range. The "
                                              f"timestamp should be within [{_long(now - before)}, "
                                              f"{_long(now + after)}]"))
        if timestamp_refused:
            raise RecordValidationError(
                ErrorCode.INVALID_TIMESTAMP,
                "One or more records have been rejected due to invalid timestamp", errors)
        if errors:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD,
                f"One or more records have been rejected due to {len(errors)} record errors in "
                f"total, and only showing the first three errors at most: [{shown}]", errors)
        pos += header.size
    return summaries
