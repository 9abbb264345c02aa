"""ProducerStateManager: per partition, what each idempotent producer last wrote (Kafka's
ProducerStateManager + ProducerAppendInfo), so that a retried batch is answered, not written twice.

Rules for a client's batch with producerId >= 0 (checked in this order, as Kafka does):
  - same epoch and the same (first, last) sequence as one of the last five batches: a duplicate,
    nothing is written and the original offsets are answered;
  - an epoch older than the known one: INVALID_PRODUCER_EPOCH;
  - an epoch newer than the known one must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
  - an unknown producer id must start at sequence 0, else UNKNOWN_PRODUCER_ID (the broker has no
    record of it: expired, or its data was deleted);
  - the same epoch must continue at last sequence + 1 (0 after 2^31 - 1), else
    OUT_OF_ORDER_SEQUENCE_NUMBER.
Replicated and replayed batches are not validated, only recorded. A producer whose last batch's
timestamp is `producer.id.expiration.ms` old is forgotten.

Snapshot file `<offset, 20 digits>.snapshot`, beside the segments: the state after every batch
below `offset` (always a log end offset). Written at roll and at close, atomically (temp, fsync,
rename); at roll through the log's flusher (a worker thread in the broker), the bytes taken at once. All integers big-endian:

    Snapshot =>
      magic          bytes[4]  b"KSPS"
      version        int16     1
      crc            uint32    CRC-32C of every byte after this field
      offset         int64     the same offset as the file name
      producerCount  int32
      Producer * producerCount =>
        producerId int64, producerEpoch int16, lastTimestamp int64, batchCount int8 (1..5),
        Batch * batchCount => firstSeq int32, lastSeq int32, firstOffset int64, lastOffset int64,
                              timestamp int64

Loading takes the newest readable snapshot at/below the log end offset (a corrupt one is deleted
and the next older one tried), then replays the log's batches from there.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from protocol.errors import ErrorCode, KafkaError
from protocol.records import BatchHeader
from storage.checkpoint import fsync_dir
from storage.log_flusher import Job, run_now
from storage.log_info import LogAppendInfo
from storage.naming import TEMP_SUFFIX, parse_snapshot_file, producer_snapshot_file

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT_MAX = 2**31 - 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

SNAPSHOT_MAGIC = b"KSPS"
SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">4shI")  # magic, version, crc
_BODY_HEAD = struct.Struct(">qi")  # offset, producer count
_PRODUCER = struct.Struct(">qhqb")  # id, epoch, last timestamp, batch count
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers wrap from 2^31 - 1 to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def last_sequence(header: BatchHeader) -> int:
    return increment_sequence(header.base_sequence, header.last_offset_delta)


class BatchMetadata(NamedTuple):
    """A tuple: made once per idempotent append, on the hot path."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer's epoch and its last five batches, oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.producer_epoch:  # a new epoch starts a new history
            self.producer_epoch = epoch
            self.batches.clear()
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp



# What a validated leader append will record, in order: (producer id, epoch, batch); commit() does.
PendingBatches = list[tuple[int, int, BatchMetadata]]


def duplicate_append_info(batch: BatchMetadata, log_append_time: bool) -> LogAppendInfo:
    """What the log answers for a duplicate: the cached batch's offsets; nothing was written."""
    return LogAppendInfo(
        first_offset=batch.first_offset,
        last_offset=batch.last_offset,
        log_append_time=batch.timestamp if log_append_time else -1,
        max_timestamp=batch.timestamp,
        offset_of_max_timestamp=batch.last_offset,
        valid_bytes=0,
        num_records=0,
        duplicate=True,
    )


def _error(code: ErrorCode, header: BatchHeader, why: str) -> KafkaError:
    return KafkaError(code, f"producer {header.producer_id} epoch {header.producer_epoch} "
                            f"sequence {header.base_sequence}: {why}")


class ProducerStateManager:
    def __init__(
        self,
        directory: Path,
        *,
        now_ms: Callable[[], int],
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.directory = Path(directory)
        self._now_ms = now_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self._last_snapshot_offset = -1
        self._dirty = False  # changed since the last snapshot
        # A snapshot written in a worker must not land after a truncation deleted the snapshots
        # above the new log end: the truncation bumps the generation, the rename checks it.
        self._generation = 0
        self._files_lock = threading.Lock()

    # -- leader appends (origin: client) ---------------------------------------------------------

    def validate(
        self, headers: Iterable[BatchHeader], first_offset: int, append_time: int | None
    ) -> PendingBatches | BatchMetadata | None:
        """Check a client's batches, which will land from `first_offset` on.

        Returns the cached batch when one is a duplicate (nothing must be written), None when no
        batch carries a producer id, else the pending changes for commit(). Raises KafkaError.
        `append_time` is the broker's time with LogAppendTime (it becomes the batches' timestamp).
        """
        pending: PendingBatches | None = None
        offset = first_offset
        for header in headers:
            base, offset = offset, offset + header.last_offset_delta + 1
            pid = header.producer_id
            if pid < 0:
                continue
            epoch, first_seq = header.producer_epoch, header.base_sequence
            last_seq = increment_sequence(first_seq, header.last_offset_delta)
            current = self.producers.get(pid)
            if current is not None and current.producer_epoch == epoch:
                for batch in current.batches:
                    if batch.first_seq == first_seq and batch.last_seq == last_seq:
                        return batch  # a duplicate
            if current is None:
                known_epoch, known_last_seq = NO_PRODUCER_EPOCH, NO_SEQUENCE
            else:
                known_epoch, known_last_seq = current.producer_epoch, current.last_seq
            if pending is None:
                pending = []
            else:  # an earlier batch of this request counts (several batches of one producer)
                for p_pid, p_epoch, p_batch in reversed(pending):
                    if p_pid == pid:
                        known_epoch, known_last_seq = p_epoch, p_batch.last_seq
                        break
            self._check(known_epoch, known_last_seq, header)
            timestamp = append_time if append_time is not None else header.max_timestamp
            pending.append((pid, epoch, BatchMetadata(first_seq, last_seq, base, offset - 1,
                                                      timestamp)))
        return pending

    @staticmethod
    def _check(known_epoch: int, known_last_seq: int, header: BatchHeader) -> None:
        epoch, first_seq = header.producer_epoch, header.base_sequence
        if first_seq < 0:
            raise _error(ErrorCode.INVALID_RECORD, header, "an idempotent batch needs a sequence")
        if epoch < known_epoch:
            raise _error(ErrorCode.INVALID_PRODUCER_EPOCH, header,
                         f"older than the current epoch {known_epoch}")
        if epoch != known_epoch:
            if first_seq == 0:
                return
            if known_epoch != NO_PRODUCER_EPOCH:
                raise _error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, header,
                             f"a new epoch (was {known_epoch}) must start at sequence 0")
            raise _error(ErrorCode.UNKNOWN_PRODUCER_ID, header,
                         "no record of this producer (expired or deleted); its first batch must "
                         "have sequence 0")
        if not in_sequence(known_last_seq, first_seq):
            raise _error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, header,
                         f"expected sequence {increment_sequence(known_last_seq, 1)}")

    def commit(self, pending: PendingBatches | None) -> None:
        """Record what validate() returned, once the batches are in the log."""
        if not pending:
            return
        for pid, epoch, batch in pending:
            entry = self.producers.get(pid)
            if entry is None:
                entry = self.producers[pid] = ProducerStateEntry(pid)
            entry.add_batch(epoch, batch)
        self._dirty = True

    # -- follower appends and replay (origin: replication) ------------------------------------------

    def update(self, headers: Iterable[BatchHeader]) -> None:
        """Record batches as they are (offsets and timestamps already assigned); no validation."""
        for header in headers:
            if header.producer_id < 0:
                continue
            entry = self.producers.get(header.producer_id)
            if entry is None:
                entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
            entry.add_batch(header.producer_epoch, BatchMetadata(
                header.base_sequence, last_sequence(header), header.base_offset,
                header.last_offset, header.max_timestamp))
            self._dirty = True

    # -- expiry ------------------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms; returns their ids."""
        now = self._now_ms() if now_ms is None else now_ms
        limit = self.producer_id_expiration_ms
        expired = [pid for pid, e in self.producers.items() if now - e.last_timestamp >= limit]
        for pid in expired:
            del self.producers[pid]
        if expired:
            self._dirty = True
        return expired

    # -- views -------------------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def describe(self) -> list[dict]:
        """Per producer: id, epoch, last sequence, last offset, last timestamp (for the control API)."""
        return [{"producer_id": e.producer_id, "epoch": e.producer_epoch, "last_sequence": e.last_seq,
                 "last_offset": e.last_offset, "last_timestamp": e.last_timestamp}
                for _, e in sorted(self.producers.items())]

    # -- snapshots ---------------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for path in self.directory.iterdir():
            offset = parse_snapshot_file(path.name)
            if offset is not None:
                offsets.append(offset)
        return sorted(offsets)

    def take_snapshot(self, offset: int, submit: Callable[[Job], None] = run_now) -> bool:
        """Write the state as of log end offset `offset`; False when that file is already current.
        The bytes are taken now; `submit` runs the write (at once by default)."""
        if offset == self._last_snapshot_offset and not self._dirty:
            return False
        body = bytearray(_BODY_HEAD.pack(offset, len(self.producers)))
        for pid, entry in sorted(self.producers.items()):
            body += _PRODUCER.pack(pid, entry.producer_epoch, entry.last_timestamp,
                                   len(entry.batches))
            for b in entry.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset,
                                    b.timestamp)
        data = _HEAD.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, crc32c(body)) + body
        path, generation = producer_snapshot_file(self.directory, offset), self._generation
        self._last_snapshot_offset, self._dirty = offset, False
        submit(lambda: self._write_snapshot(path, data, generation))
        return True

    def _write_snapshot(self, path: Path, data: bytes, generation: int) -> None:
        tmp = path.with_name(path.name + TEMP_SUFFIX)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with self._files_lock:
            if generation != self._generation:  # truncated meanwhile: this state is gone
                tmp.unlink(missing_ok=True)
                return
            os.replace(tmp, path)
        fsync_dir(self.directory)

    def _new_generation(self) -> None:
        with self._files_lock:
            self._generation += 1

    @staticmethod
    def read_snapshot(path: Path) -> dict[int, ProducerStateEntry]:
        """Parse one snapshot file; KafkaError(CORRUPT_MESSAGE) when it is damaged or unknown."""
        data = path.read_bytes()
        try:
            magic, version, crc = _HEAD.unpack_from(data, 0)
            if magic != SNAPSHOT_MAGIC or version != SNAPSHOT_VERSION:
                raise ValueError(f"magic {magic!r} version {version}")
            body = memoryview(data)[_HEAD.size:]
            if crc32c(body) != crc:
                raise ValueError("CRC mismatch")
            offset, count = _BODY_HEAD.unpack_from(body, 0)
            if offset != parse_snapshot_file(path.name):
                raise ValueError(f"offset {offset} differs from the file name")
            pos, producers = _BODY_HEAD.size, {}
            for _ in range(count):
                pid, epoch, last_ts, nbatches = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
                entry = ProducerStateEntry(pid, epoch, last_timestamp=last_ts)
                for _ in range(nbatches):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                producers[pid] = entry
            if pos != len(body):
                raise ValueError(f"{len(body) - pos} trailing bytes")
        except (ValueError, struct.error) as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"producer snapshot {path}: {exc}") from None
        return producers

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int,
        batches_from: Callable[[int], Iterable[BatchHeader]],
    ) -> None:
        """Rebuild from the newest good snapshot at/below the log end, then replay the log after it.

        Used on open and after a truncation; snapshots above the log end are deleted first.
        """
        self.producers = {}
        start = log_start_offset
        self._last_snapshot_offset = -1
        self._new_generation()
        for offset in reversed(self.snapshot_offsets()):
            path = producer_snapshot_file(self.directory, offset)
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                self.producers = self.read_snapshot(path)
            except KafkaError:
                path.unlink(missing_ok=True)  # damaged: try the one before
                continue
            start, self._last_snapshot_offset = max(offset, log_start_offset), offset
            break
        if start < log_end_offset:
            self.update(h for h in batches_from(start) if h.base_offset >= start)
        self._dirty = self._last_snapshot_offset != log_end_offset
        self.remove_expired_producers()

    def delete_snapshots_before(self, offset: int) -> None:
        """Retention moved the log start offset: snapshots below it describe deleted data."""
        for old in self.snapshot_offsets():
            if old < offset:
                producer_snapshot_file(self.directory, old).unlink(missing_ok=True)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log restarted empty at `offset`: every producer and snapshot goes."""
        self.producers = {}
        self._new_generation()
        for old in self.snapshot_offsets():
            producer_snapshot_file(self.directory, old).unlink(missing_ok=True)
        self._last_snapshot_offset, self._dirty = -1, True
