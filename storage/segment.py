"""LogSegment: one `.log` file of back-to-back batches with its offset and time indexes.

Reads go through os.pread on a file descriptor (never the whole file); appends use O_APPEND writes.
The descriptor comes from the LogManager's bounded FileHandleCache (storage/file_handles.py): a segment
holds none while idle and reopens its file on next use.
Invariant: the file holds only complete batches from `base_offset` on, except after a crash, which
`recover()` repairs by truncating at the first torn or corrupt batch.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from protocol.file_region import FileRegion
from protocol.records import (
    BATCH_LENGTH_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MAX_DECOMPRESSED_BYTES,
    BatchHeader,
    batch_crc_ok,
    decode_batch,
)
from storage.disk_faults import DiskFaults, FileKind
from storage.file_handles import FileHandleCache
from storage.naming import log_file, offset_index_file, time_index_file, transaction_index_file
from storage.offset_index import OffsetIndex
from storage.time_index import TimeIndex
from storage.transaction_index import TransactionIndex

READ_CHUNK = 64 * 1024  # forward scans from an index entry: an interval plus a few batches
RECOVERY_CHUNK = 1024 * 1024  # whole-file scans read in bigger pieces
RECENT_BATCHES = 64  # appended batch positions remembered for tail fetches
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# Reads this large may be left in the file as a FileRegion (sent with sendfile); smaller ones are
# copied: one pread costs less than a descriptor, its sendfile and its close.
MIN_REGION_BYTES = 32 * 1024


def first_record_at_or_after(
    batch: bytes | memoryview, timestamp: int, starting_offset: int, max_decompressed: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the batch's first record at/after `starting_offset` whose timestamp
    is >= `timestamp`. A function of the bytes alone: it may run in a worker thread."""
    for record in decode_batch(batch, max_decompressed=max_decompressed)[1]:
        if record.timestamp >= timestamp and record.offset >= starting_offset:
            return record.offset, record.timestamp
    return None


def offset_of_max_timestamp(batch: bytes | memoryview, max_decompressed: int) -> int | None:
    """Offset of the batch's first record whose timestamp is the batch's max timestamp (Kafka's
    RecordBatch.offsetOfMaxTimestamp; with LogAppendTime that is the first record), or None. A
    function of the bytes alone: it may run in a worker thread."""
    header, records = decode_batch(batch, max_decompressed=max_decompressed)
    return next((r.offset for r in records if r.timestamp == header.max_timestamp), None)


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: int, *, index_interval_bytes: int, max_index_size: int,
        disk: DiskFaults | None = None, files: FileHandleCache | None = None, fresh: bool = False,
    ) -> None:
        """`fresh`: the first segment of a log whose folder was just made (nothing to read)."""
        self.base_offset = base_offset
        self.disk = disk if disk is not None else DiskFaults()  # writes, fsyncs, truncations go here
        self.path = log_file(directory, base_offset)
        self.index_interval_bytes = index_interval_bytes
        # Without a shared cache the segment keeps its one descriptor open, as a cache of one.
        self._file = (FileHandleCache(1) if files is None else files).file(
            self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        self.closed = False
        fd = self._file.fd()  # the file is made now, as Kafka makes a new segment's
        self.size = 0 if fresh else os.fstat(fd).st_size
        self.offset_index = OffsetIndex(
            offset_index_file(directory, base_offset), base_offset, max_index_size, fresh=fresh)
        self.time_index = TimeIndex(
            time_index_file(directory, base_offset), base_offset, max_index_size, fresh=fresh)
        self.txn_index = TransactionIndex(transaction_index_file(directory, base_offset), base_offset,
                                          fresh=fresh)
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.disk = self.disk
        # Offset after the last batch; set by load_tail(), recover() and append().
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        self.rolling_base_ms: int | None = None  # when this segment's segment.ms clock started
        self._dirty = False
        # recover() rewrote the indexes without fsyncs: the next prepare_flush hands them over.
        self._indexes_unsynced = False
        # Followers and consumers at the tail fetch from the base offset of a batch just appended:
        # remembering the last few spares the index lookup and the forward scan behind it.
        self._recent: dict[int, tuple[int, BatchHeader]] = {}

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"

    # -- scanning --------------------------------------------------------------------------------

    def batches(
        self, start: int = 0, *, chunk_size: int = READ_CHUNK
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """Yield (position, header, batch bytes) for well-framed complete batches from `start`.

        Stops silently at a torn tail or at bytes that cannot be a v2 batch; callers compare the end
        of the last batch with `size` to tell. The memoryview is only valid until the next step.
        """
        return _batches(self._pread, self.size, start, chunk_size)

    def _pread(self, n: int, pos: int) -> bytes:
        # The descriptor is looked up for every read: a scan may be suspended between two reads
        # while other segments are opened and this one's descriptor is evicted.
        return os.pread(self._file.fd(), n, pos)

    def snapshot(self) -> SegmentSnapshot:
        """A read-only view of this segment as it is now, on a file descriptor of its own (outside
        the cache: the caller closes it)."""
        return SegmentSnapshot(self)

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset >= offset (index, then scan)."""
        recent = self._recent.get(offset)
        if recent is not None:
            return recent
        _, start = self.offset_index.lookup(offset)
        for pos, header, _ in self.batches(start):
            if header.last_offset >= offset:
                return pos, header
        return None

    def _index_batch(self, pos: int, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if (
            self.bytes_since_last_index_entry > self.index_interval_bytes
            and not self.offset_index.is_full
        ):
            self.offset_index.append(header.last_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.size

    # -- loading and recovery ----------------------------------------------------------------------

    def indexes_sane(self) -> bool:
        return (
            self.offset_index.existed
            and self.time_index.existed
            and self.offset_index.sane(self.size)
            and self.time_index.sane()
        )

    def load_tail(self) -> bool:
        """Trusting load: take state from the indexes, scan only past the last index entry.

        Returns False when the indexes do not match the file (the caller then runs recover()).
        """
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        if self.max_timestamp < 0:
            self.offset_of_max_timestamp = -1
        start = self.offset_index.last_position
        self.next_offset, end = self.base_offset, start
        first = True
        for pos, header, _ in self.batches(start):
            if (
                first
                and self.offset_index.entries
                and header.last_offset != self.offset_index.last_offset
            ):
                return False  # the last entry points at something other than its batch
            first = False
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = (
                    header.max_timestamp,
                    header.last_offset,
                )
            self.next_offset, end = header.next_offset, pos + header.size
        if end != self.size or (first and self.offset_index.entries):
            return False
        self.bytes_since_last_index_entry = end - start
        return True

    def recover(self) -> int:
        """Rebuild both indexes by scanning every batch with its CRC; truncate at the first bad one.
        The index files are written, not fsynced: prepare_flush names them for the flusher.

        Returns the number of bytes cut off the end of the file.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._recent.clear()
        self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        self.bytes_since_last_index_entry = 0
        self.next_offset, valid_end = self.base_offset, 0
        for pos, header, view in self.batches(0, chunk_size=RECOVERY_CHUNK):
            if header.base_offset < self.next_offset or not batch_crc_ok(view, 0, header):
                break
            self._index_batch(pos, header)
            self.next_offset, valid_end = header.next_offset, pos + header.size
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self._file.fd(), valid_end)
            self.size = valid_end
            self._dirty = True
        self.txn_index.truncate_to(self.next_offset)
        self.offset_index.write_appended()
        self.time_index.write_appended()
        self._indexes_unsynced = True
        return truncated

    def index_layout(self, layout: Sequence[tuple[int, BatchHeader]]) -> bool:
        """recover() for a file whose writer knows each batch's position and header (the log
        cleaner's output): indexes built from them, the file not read. False, nothing changed,
        when they do not cover the file exactly."""
        end = layout[-1][0] + layout[-1][1].size if layout else 0
        if end != self.size:
            return False
        self.offset_index.reset()
        self.time_index.reset()
        self._recent.clear()
        self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        self.bytes_since_last_index_entry = 0
        self.next_offset = self.base_offset
        for pos, header in layout:
            self._index_batch(pos, header)
            self.next_offset = header.next_offset
        self.offset_index.write_appended()
        self.time_index.write_appended()
        self._indexes_unsynced = True
        return True

    def first_batch_header(self) -> BatchHeader | None:
        if self.size < HEADER_SIZE:
            return None
        return BatchHeader(*HEADER_STRUCT.unpack(self._pread(HEADER_SIZE, 0)))

    # -- appends and reads -------------------------------------------------------------------------

    def append(
        self, buf: bytes | bytearray, batches: list[tuple[int, BatchHeader]], now_ms: int
    ) -> None:
        """Write whole batches (positions in `batches` are relative to buf) and index them."""
        start = self.size
        view = memoryview(buf)
        written = 0
        fd = self._file.fd()
        try:
            while written < len(view):
                written += self.disk.write(fd, view[written:])
        except OSError:
            # A partial write (disk full, EIO) must not leave bytes `size` does not know about: the
            # next append would land after them and every position indexed from there be off. If
            # the truncation fails too, the log dir goes offline anyway and recover() cuts the tail.
            with contextlib.suppress(OSError):
                self.disk.truncate(fd, start)
            raise
        for rel, header in batches:
            self._index_batch(start + rel, header)
            self.next_offset = header.next_offset
            self._recent[header.base_offset] = (start + rel, header)
        while len(self._recent) > RECENT_BATCHES:
            del self._recent[next(iter(self._recent))]  # the oldest: dicts keep insertion order
        self.size += len(view)
        self._dirty = True
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool,
        as_region: bool = False,
    ) -> tuple[bytes | FileRegion, int] | None:
        """(whole batches from the one holding `offset`, file position); None if beyond this segment.
        `as_region`: the batches as a FileRegion of this file, their bytes not read."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        pos, first = found
        if max_offset is not None and first.base_offset >= max_offset:
            return b"", pos
        if first.size > max_bytes:
            if not min_one_message:
                return b"", pos
            return (self._region(pos, first.size) if as_region
                    else self._pread(first.size, pos)), pos
        if as_region:
            return self._region(pos, self._whole_batches(pos, first, max_bytes, max_offset)), pos
        data = self._pread(min(max_bytes, self.size - pos), pos)
        view, n = memoryview(data), len(data)
        # Batches before an indexed one that starts inside the data (and below max_offset) are all
        # whole and wanted: walk batch headers only from there, not from the first batch.
        end = max(self.offset_index.floor_position(pos + n, max_offset) - pos, 0)
        while n - end >= HEADER_SIZE:
            size = int.from_bytes(view[end + BATCH_LENGTH_OFFSET : end + 12], "big") + LOG_OVERHEAD
            if end + size > n:
                break
            if max_offset is not None and int.from_bytes(view[end : end + 8], "big") >= max_offset:
                break
            end += size
        return (data if end == n else data[:end]), pos

    def _region(self, position: int, size: int) -> bytes | FileRegion:
        """The bytes at `position` as a FileRegion, unless they are few (a copy costs less than a
        descriptor and a sendfile call of their own) or no descriptor is left for it."""
        fd = self._file.fd()
        if size >= MIN_REGION_BYTES:
            try:
                return FileRegion(fd, position, size)
            except OSError:  # EMFILE: the descriptors are the broker's; these bytes are copied
                pass
        return os.pread(fd, size, position)

    def _whole_batches(self, pos: int, first: BatchHeader, max_bytes: int,
                       max_offset: int | None) -> int:
        """How many bytes from `pos` (where `first` starts) are whole batches within max_bytes and
        below max_offset, reading batch headers only: from the last indexed batch inside the
        limit on, each header at its place (a few: entries are index.interval.bytes apart)."""
        n = min(max_bytes, self.size - pos)
        end = first.size  # within n: larger first batches are answered before
        if end == n:
            return end
        end = max(self.offset_index.floor_position(pos + n, max_offset) - pos, end)
        while n - end >= HEADER_SIZE:
            head = self._pread(12, pos + end)
            size = int.from_bytes(head[BATCH_LENGTH_OFFSET:12], "big") + LOG_OVERHEAD
            if end + size > n:
                break
            if max_offset is not None and int.from_bytes(head[:8], "big") >= max_offset:
                break
            end += size
        return end

    def timestamp_candidates(
        self, timestamp: int, starting_offset: int
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Batches from `starting_offset` on that may hold a record with timestamp >= target."""
        # Entries with a smaller timestamp prove every record up to their offset is too early.
        _, offset = self.time_index.lookup(timestamp - 1)
        _, start = self.offset_index.lookup(max(offset, starting_offset))
        for _, header, view in self.batches(start):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            yield header, view

    def max_timestamp_batch(self) -> tuple[BatchHeader, memoryview] | None:
        """The first batch carrying the segment's max timestamp, found from the offset index's
        entry for the batch the segment recorded it in (Kafka scans the same way)."""
        if self.max_timestamp < 0:
            return None
        _, start = self.offset_index.lookup(self.offset_of_max_timestamp)
        for _, header, view in self.batches(start):
            if header.max_timestamp == self.max_timestamp:
                return header, view
        return None

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int, *,
        max_decompressed: int = MAX_DECOMPRESSED_BYTES,
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at/after starting_offset with timestamp >= target."""
        for _, view in self.timestamp_candidates(timestamp, starting_offset):
            found = first_record_at_or_after(view, timestamp, starting_offset, max_decompressed)
            if found is not None:
                return found
        return None

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when no batch carries one (Kafka's rule)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self._file.fd()).st_mtime * 1000)

    # -- truncation and lifecycle --------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding `offset` and everything after it; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos, header = found
        removed = self.size - pos
        self._recent.clear()
        os.ftruncate(self._file.fd(), pos)
        self.size = pos
        self._dirty = True
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self.load_tail()  # recompute next offset and max timestamp from what is left
        if self.size == 0:
            self.rolling_base_ms = None
        return removed

    def on_become_inactive(self) -> None:
        self.seal()
        self.flush()

    def seal(self) -> None:
        """Record the final max timestamp so that a reload finds it in the time index (as Kafka)."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )

    def flush(self) -> None:
        if self._dirty:
            self.disk.fsync(self._file.fd())
            self._dirty = False
        for index in (self.offset_index, self.time_index, self.txn_index):
            if self._indexes_unsynced and index.path.exists():
                index.write_appended()
                self.disk.fsync_path(index.path, FileKind.INDEX)
            else:
                index.flush()
        self._indexes_unsynced = False

    @property
    def indexes_unsynced(self) -> bool:
        return self._indexes_unsynced

    def prepare_flush(self) -> list[Path]:
        """flush() in two halves: here the index entries are written (no fsync), and the files
        to fsync are returned, for storage.checkpoint.fsync_path in any thread. Data written through
        this segment's descriptor is made durable by an fsync on any descriptor of the file."""
        paths = [self.path] if self._dirty else []
        self._dirty = False
        for index in (self.offset_index, self.time_index, self.txn_index):
            # `|` not `or`: the entries are written either way
            if index.write_appended() | (self._indexes_unsynced and index.path.exists()):
                paths.append(index.path)
        self._indexes_unsynced = False
        return paths

    def release_file(self) -> None:
        """Close the descriptor now (an inactive segment holds none while idle)."""
        self._file.close()

    def move_file_to(self, files: FileHandleCache) -> None:
        """Open its file through `files` from now on (its descriptor in the old cache closed)."""
        self._file.close()
        self._file = files.file(self._file.path, self._file.flags)

    def close(self) -> None:
        if not self.closed:
            self.on_become_inactive()
            self._file.close()
            self.closed = True

    def close_unflushed(self) -> None:
        """Close without writing anything more (its log dir failed, or what is left to write is
        handed to the flusher: see Log.close_in_background)."""
        self._file.close()
        self.closed = True

    def delete(self) -> None:
        self._file.close()
        self.closed = True
        self.path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()


def _batches(
    pread: Callable[[int, int], bytes], size: int, start: int, chunk_size: int
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """LogSegment.batches over any reader of a segment file (pread(n, pos)), up to `size`."""
    pos, end, need = start, size, 0
    while pos < end:
        wanted = min(max(chunk_size, need), end - pos)
        data = pread(wanted, pos)
        view, n, off = memoryview(data), len(data), 0
        while True:
            if n - off < HEADER_SIZE:
                need = HEADER_SIZE
                break
            length = int.from_bytes(
                view[off + BATCH_LENGTH_OFFSET : off + 12], "big", signed=True
            )
            if length < _MIN_BATCH_LENGTH or view[off + MAGIC_OFFSET] != MAGIC_V2:
                return
            batch_size = length + LOG_OVERHEAD
            if n - off < batch_size:
                need = batch_size
                break
            yield (
                pos + off,
                BatchHeader(*HEADER_STRUCT.unpack_from(view, off)),
                view[off : off + batch_size],
            )
            off += batch_size
        if off == 0 and (pos + need > end or len(data) < wanted):
            return  # torn tail, or the file is shorter than `size` (truncated under a snapshot)
        pos += off


class SegmentSnapshot:
    """An inactive segment as it was when taken, readable from another thread (the log cleaner's
    worker) on a file descriptor of its own: if the log deletes or replaces the segment meanwhile,
    the file stays readable (POSIX keeps an unlinked file for its open descriptors), and
    `is_current()` tells the owner the snapshot no longer stands for the log."""

    __slots__ = ("segment", "base_offset", "next_offset", "size", "_largest_timestamp", "_fd")

    def __init__(self, segment: LogSegment) -> None:
        self.segment = segment
        self.base_offset = segment.base_offset
        self.next_offset = segment.next_offset
        self.size = segment.size
        self._largest_timestamp = segment.largest_timestamp()
        # Opened now, not at the first read: the file stays readable if the segment goes meanwhile.
        # The cleaner holds one per segment of the range it cleans, one log at a time.
        self._fd = os.open(segment.path, os.O_RDONLY)

    def __repr__(self) -> str:
        return f"SegmentSnapshot(base={self.base_offset}, next={self.next_offset}, size={self.size})"

    def largest_timestamp(self) -> int:
        return self._largest_timestamp

    def batches(
        self, start: int = 0, *, chunk_size: int = READ_CHUNK
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        return _batches(functools.partial(os.pread, self._fd), self.size, start, chunk_size)

    def is_current(self) -> bool:
        """The segment is still open and as large as when the snapshot was taken."""
        return not self.segment.closed and self.segment.size == self.size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
