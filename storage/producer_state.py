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
Transactions (KIP-98): a producer's first transactional batch opens its transaction at that offset;
a plain batch while one is open is INVALID_TXN_STATE; a control batch (a commit or abort marker,
appended only for the transaction coordinator) closes it, unless its epoch is older than the
producer's (INVALID_PRODUCER_EPOCH) or its coordinator epoch older than the last marker's
(TRANSACTION_COORDINATOR_FENCED). The first offset of the oldest open transaction, or of a closed one
whose marker is not yet below the high watermark, is the partition's first unstable offset.
Replicated and replayed batches are not validated, only recorded. A producer whose last batch's
timestamp is `producer.id.expiration.ms` old is forgotten, unless its transaction is open.

Snapshot file `<offset, 20 digits>.snapshot`, beside the segments: the state after every batch
below `offset` (always a log end offset). Written at roll and at close, atomically (temp, fsync,
rename); at roll through the log's flusher (a worker thread in the broker), the bytes taken at once. All integers big-endian:

    Snapshot =>
      magic          bytes[4]  b"KSPS"
      version        int16     2 (version 1, without the transaction fields, is still read)
      crc            uint32    CRC-32C of every byte after this field
      offset         int64     the same offset as the file name
      producerCount  int32
      Producer * producerCount =>
        producerId int64, producerEpoch int16, lastTimestamp int64,
        currentTxnFirstOffset int64 (-1: none), coordinatorEpoch int32,   (version 2 only)
        batchCount int8 (0..5),
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from protocol.checksum import crc32c
from protocol.errors import ErrorCode, KafkaError
from protocol.records import BatchHeader, decode_batch
from protocol.transaction_records import ControlType, read_control_type, read_coordinator_epoch
from storage.checkpoint import fsync_dir
from storage.log_config import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from storage.log_flusher import Job, run_now
from storage.log_info import LogAppendInfo
from storage.naming import TEMP_SUFFIX, as_path, parse_snapshot_file, producer_snapshot_file

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT_MAX = 2**31 - 1

SNAPSHOT_MAGIC = b"KSPS"
SNAPSHOT_VERSION = 2
_HEAD = struct.Struct(">4shI")  # magic, version, crc
_BODY_HEAD = struct.Struct(">qi")  # offset, producer count
_PRODUCER_V1 = struct.Struct(">qhqb")  # id, epoch, last timestamp, batch count
_PRODUCER = struct.Struct(">qhqqib")  # ... last timestamp, txn first offset, coordinator epoch, count
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


class EndTxnMarker(NamedTuple):
    """What a control batch says: commit or abort, from which coordinator epoch."""

    control_type: ControlType
    coordinator_epoch: int


class CompletedTxn(NamedTuple):
    """A transaction closed by its marker at `last_offset`."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def end_txn_marker(header: BatchHeader, batch: bytes | memoryview) -> EndTxnMarker | None:
    """The marker a control batch carries; None for a control record of a type this broker does
    not know (later Kafka versions may add some: they are skipped, as Kafka does)."""
    records = decode_batch(batch)[1]
    if not records:
        return None
    control_type = read_control_type(records[0].key)
    if control_type is None:
        return None
    return EndTxnMarker(control_type, read_coordinator_epoch(records[0].value))


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
    current_txn_first_offset: int = -1  # the open transaction's first offset; -1 when none
    coordinator_epoch: int = -1  # of the last marker

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

    def end_transaction(self, epoch: int, marker: EndTxnMarker, offset: int,
                        timestamp: int) -> CompletedTxn:
        first = self.current_txn_first_offset if self.current_txn_first_offset >= 0 else offset
        if epoch != self.producer_epoch:
            self.producer_epoch = epoch
            self.batches.clear()
        self.current_txn_first_offset = -1
        self.coordinator_epoch = marker.coordinator_epoch
        self.last_timestamp = timestamp
        return CompletedTxn(self.producer_id, first, offset,
                            marker.control_type == ControlType.ABORT)



class PendingAppend(NamedTuple):
    """One validated batch of a leader append, recorded by commit() once it is in the log."""

    producer_id: int
    epoch: int
    batch: BatchMetadata  # for a marker: its offset, sequence -1
    txn_first_offset: int = -1  # >= 0: this batch opens a transaction
    marker: EndTxnMarker | None = None
    transactional: bool = False


PendingBatches = list[PendingAppend]


class _Known(NamedTuple):
    epoch: int
    last_seq: int
    in_txn: bool
    coordinator_epoch: int


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
        self.directory = as_path(directory)
        self._now_ms = now_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> its open transaction's first offset
        self.unreplicated: list[CompletedTxn] = []  # closed, marker not yet below the HW
        self._last_snapshot_offset = -1
        self._dirty = False  # changed since the last snapshot
        # A snapshot written in a worker must not land after a truncation deleted the snapshots
        # above the new log end: the truncation bumps the generation, the rename checks it.
        self._generation = 0
        self._files_lock = threading.Lock()

    # -- leader appends (origin: client) ---------------------------------------------------------

    def validate(
        self, headers: Iterable[BatchHeader], first_offset: int, append_time: int | None,
        markers: Sequence[EndTxnMarker | None] | None = None, check_sequences: bool = True,
    ) -> PendingBatches | BatchMetadata | None:
        """Check a client's batches, which will land from `first_offset` on.

        Returns the cached batch when one is a duplicate (nothing must be written), None when no
        batch carries a producer id, else the pending changes for commit(). Raises KafkaError.
        `append_time` is the broker's time with LogAppendTime (it becomes the batches' timestamp).
        `markers` (the transaction coordinator's appends only) holds, per header, the marker of a
        control batch. `check_sequences` False (a coordinator's own append, as Kafka's
        AppendOrigin.Coordinator): batches without a sequence, such as the group coordinator's
        transactional offset commits, are checked for their epoch only.
        """
        pending: PendingBatches | None = None
        offset = first_offset
        for i, header in enumerate(headers):
            base, offset = offset, offset + header.last_offset_delta + 1
            pid = header.producer_id
            if pid < 0:
                continue
            epoch, first_seq = header.producer_epoch, header.base_sequence
            current = self.producers.get(pid)
            if pending is None:
                pending = []
            known = self._known(current, pid, pending)
            timestamp = append_time if append_time is not None else header.max_timestamp
            if header.is_control:
                marker = markers[i] if markers is not None else None
                if marker is None:
                    raise _error(ErrorCode.INVALID_RECORD, header, "not a transaction marker")
                if epoch < known.epoch:
                    raise _error(ErrorCode.INVALID_PRODUCER_EPOCH, header,
                                 f"marker older than the current epoch {known.epoch}")
                if marker.coordinator_epoch < known.coordinator_epoch:
                    raise _error(ErrorCode.TRANSACTION_COORDINATOR_FENCED, header,
                                 f"coordinator epoch {marker.coordinator_epoch} is older than "
                                 f"{known.coordinator_epoch}")
                pending.append(PendingAppend(pid, epoch, BatchMetadata(
                    NO_SEQUENCE, NO_SEQUENCE, base, offset - 1, timestamp), marker=marker))
                continue
            if not check_sequences and first_seq < 0:
                if epoch < known.epoch:
                    raise _error(ErrorCode.INVALID_PRODUCER_EPOCH, header,
                                 f"older than the current epoch {known.epoch}")
                last_seq = NO_SEQUENCE
            else:
                last_seq = increment_sequence(first_seq, header.last_offset_delta)
                if current is not None and current.producer_epoch == epoch:
                    for batch in current.batches:
                        if batch.first_seq == first_seq and batch.last_seq == last_seq:
                            return batch  # a duplicate
                self._check(known.epoch, known.last_seq, header)
            txn_first_offset = -1
            if header.is_transactional:
                if not known.in_txn:
                    txn_first_offset = base
            elif known.in_txn:
                raise _error(ErrorCode.INVALID_TXN_STATE, header,
                             "a non-transactional batch while the producer's transaction is open")
            pending.append(PendingAppend(
                pid, epoch, BatchMetadata(first_seq, last_seq, base, offset - 1, timestamp),
                txn_first_offset, transactional=header.is_transactional))
        return pending

    @staticmethod
    def _known(current: ProducerStateEntry | None, pid: int, pending: PendingBatches) -> _Known:
        """The producer's state as of the batches validated so far in this append."""
        for p in reversed(pending):  # an earlier batch of this request counts
            if p.producer_id == pid:
                in_txn = p.marker is None and p.transactional
                coordinator_epoch = p.marker.coordinator_epoch if p.marker else (
                    current.coordinator_epoch if current else -1)
                last_seq = p.batch.last_seq if p.marker is None else (
                    current.last_seq if current is not None and current.producer_epoch == p.epoch
                    else NO_SEQUENCE)
                return _Known(p.epoch, last_seq, in_txn, coordinator_epoch)
        if current is None:
            return _Known(NO_PRODUCER_EPOCH, NO_SEQUENCE, False, -1)
        return _Known(current.producer_epoch, current.last_seq,
                      current.current_txn_first_offset >= 0, current.coordinator_epoch)

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

    def commit(self, pending: PendingBatches | None) -> list[CompletedTxn]:
        """Record what validate() returned, once the batches are in the log; returns the
        transactions its markers closed."""
        if not pending:
            return []
        completed: list[CompletedTxn] = []
        for p in pending:
            entry = self.producers.get(p.producer_id)
            if entry is None:
                entry = self.producers[p.producer_id] = ProducerStateEntry(p.producer_id)
            if p.marker is not None:
                completed.append(self._end_transaction(entry, p.epoch, p.marker,
                                                       p.batch.first_offset, p.batch.timestamp))
                continue
            entry.add_batch(p.epoch, p.batch)
            if p.txn_first_offset >= 0:
                entry.current_txn_first_offset = p.txn_first_offset
                self.ongoing[p.producer_id] = p.txn_first_offset
        self._dirty = True
        return completed

    def _end_transaction(self, entry: ProducerStateEntry, epoch: int, marker: EndTxnMarker,
                         offset: int, timestamp: int) -> CompletedTxn:
        txn = entry.end_transaction(epoch, marker, offset, timestamp)
        self.ongoing.pop(entry.producer_id, None)
        self.unreplicated.append(txn)
        return txn

    # -- transactions --------------------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet decided below the high watermark:
        open, or closed by a marker the high watermark has not passed. None when there is none."""
        if not self.ongoing and not self.unreplicated:
            return None  # every Fetch asks, per partition: most logs have no transactions
        return min([*self.ongoing.values(), *(t.first_offset for t in self.unreplicated)])

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Closed transactions whose marker is below the high watermark are stable."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]

    def last_stable_offset_of(self, txn: CompletedTxn) -> int:
        """The LSO an aborted transaction's index entry records (Kafka's): the first offset of the
        oldest other open transaction, or the offset after the marker when there is none."""
        others = [o for pid, o in self.ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    # -- follower appends and replay (origin: replication) ------------------------------------------

    def update(self, batches: Iterable[tuple[BatchHeader, bytes | memoryview]]
               ) -> list[CompletedTxn]:
        """Record (header, batch bytes) as they are (offsets and timestamps already assigned); no
        validation. Returns the transactions their markers closed."""
        completed: list[CompletedTxn] = []
        for header, batch in batches:
            if header.producer_id < 0:
                continue
            entry = self.producers.get(header.producer_id)
            if entry is None:
                entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
            self._dirty = True
            if header.is_control:
                marker = end_txn_marker(header, batch)
                if marker is not None:
                    completed.append(self._end_transaction(
                        entry, header.producer_epoch, marker, header.base_offset,
                        header.max_timestamp))
                continue
            entry.add_batch(header.producer_epoch, BatchMetadata(
                header.base_sequence, last_sequence(header), header.base_offset,
                header.last_offset, header.max_timestamp))
            if header.is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = header.base_offset
                self.ongoing[header.producer_id] = header.base_offset
        return completed

    # -- expiry ------------------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms; returns their ids."""
        now = self._now_ms() if now_ms is None else now_ms
        limit = self.producer_id_expiration_ms
        expired = [pid for pid, e in self.producers.items()
                   if now - e.last_timestamp >= limit and e.current_txn_first_offset < 0]
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
                 "last_offset": e.last_offset, "last_timestamp": e.last_timestamp,
                 "coordinator_epoch": e.coordinator_epoch,
                 "current_txn_start_offset": e.current_txn_first_offset}
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
                                   entry.current_txn_first_offset, entry.coordinator_epoch,
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
            if magic != SNAPSHOT_MAGIC or version not in (1, SNAPSHOT_VERSION):
                raise ValueError(f"magic {magic!r} version {version}")
            body = memoryview(data)[_HEAD.size:]
            if crc32c(body) != crc:
                raise ValueError("CRC mismatch")
            offset, count = _BODY_HEAD.unpack_from(body, 0)
            if offset != parse_snapshot_file(path.name):
                raise ValueError(f"offset {offset} differs from the file name")
            pos, producers = _BODY_HEAD.size, {}
            for _ in range(count):
                if version == 1:
                    pid, epoch, last_ts, nbatches = _PRODUCER_V1.unpack_from(body, pos)
                    txn_first, coordinator_epoch = -1, -1
                    pos += _PRODUCER_V1.size
                else:
                    pid, epoch, last_ts, txn_first, coordinator_epoch, nbatches = \
                        _PRODUCER.unpack_from(body, pos)
                    pos += _PRODUCER.size
                entry = ProducerStateEntry(pid, epoch, last_timestamp=last_ts,
                                           current_txn_first_offset=txn_first,
                                           coordinator_epoch=coordinator_epoch)
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
        batches_from: Callable[[int], Iterable[tuple[BatchHeader, memoryview]]],
        max_snapshot_offset: int | None = None,
    ) -> list[CompletedTxn]:
        """Rebuild from the newest good snapshot at/below the log end, then replay the log after it.

        Used on open and after a truncation; snapshots above the log end are deleted first.
        Returns the transactions the replayed markers closed (their index entries may be missing
        after a crash). After a crash, `max_snapshot_offset` (the recovery point) makes the replay
        cover every marker whose index entry may not have been flushed.
        """
        self.producers, self.ongoing, self.unreplicated = {}, {}, []
        start = log_start_offset
        self._last_snapshot_offset = -1
        self._new_generation()
        for offset in reversed(self.snapshot_offsets()):
            path = producer_snapshot_file(self.directory, offset)
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            if max_snapshot_offset is not None and offset > max_snapshot_offset:
                continue
            try:
                self.producers = self.read_snapshot(path)
            except KafkaError:
                path.unlink(missing_ok=True)  # damaged: try the one before
                continue
            start, self._last_snapshot_offset = max(offset, log_start_offset), offset
            break
        self.ongoing = {pid: e.current_txn_first_offset for pid, e in self.producers.items()
                        if e.current_txn_first_offset >= 0}
        completed = []
        if start < log_end_offset:
            completed = self.update((h, b) for h, b in batches_from(start) if h.base_offset >= start)
        self._dirty = self._last_snapshot_offset != log_end_offset
        self.remove_expired_producers()
        return completed

    def delete_snapshots_before(self, offset: int) -> None:
        """Retention moved the log start offset: snapshots below it describe deleted data."""
        for old in self.snapshot_offsets():
            if old < offset:
                producer_snapshot_file(self.directory, old).unlink(missing_ok=True)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log restarted empty at `offset`: every producer and snapshot goes."""
        self.producers, self.ongoing, self.unreplicated = {}, {}, []
        self._new_generation()
        for old in self.snapshot_offsets():
            producer_snapshot_file(self.directory, old).unlink(missing_ok=True)
        self._last_snapshot_offset, self._dirty = -1, True
