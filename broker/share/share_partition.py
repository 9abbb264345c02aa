"""SharePartition: one share group's view of one topic partition, kept by the partition's leader
(Kafka's SharePartition). Records from the share-partition start offset on are in flight, each
Available, Acquired (by one member, under an acquisition lock), Acknowledged or Archived, with
its delivery count; the start offset moves over the records that are done.

An acquisition lock is a timer task on the broker's timing wheel: when it fires before the
member acknowledged, its records are Available again, or Archived once they were delivered
`group.share.delivery.count.limit` times.

`snapshot()` is what the share coordinator keeps of it (acquired records as Available with their
delivery count: a new leader hands them out again), `restore` the way back.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_batches
from timer.timer_task import TimerTask


class RecordState(enum.IntEnum):
    """Kafka's RecordState (the ids its share-group state records keep)."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """A ShareFetch/ShareAcknowledge acknowledgement, per offset."""
    GAP = 0  # no record at this offset (compaction): nothing to deliver
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # (v2, KIP-1222) the records stay acquired by the member, their lock restarted


class AbortedTxn(Protocol):
    """An aborted transaction as the log's transaction index gives it."""
    producer_id: int
    first_offset: int
    last_offset: int  # its abort marker's offset


class AcquisitionLock(TimerTask):
    """The lock on the records one fetch acquired for one member; cancelled once all of them are
    acknowledged or released, else it releases those still acquired when it fires."""

    __slots__ = ("member_id", "held", "on_expire")

    def __init__(self, delay_ms: int, member_id: str,
                 on_expire: Callable[[AcquisitionLock], None]) -> None:
        super().__init__(delay_ms)
        self.member_id = member_id
        self.held = 0  # records it still holds
        self.on_expire = on_expire

    def run(self) -> None:
        self.on_expire(self)

    def release_one(self) -> None:
        self.held -= 1
        if self.held <= 0:
            self.cancel()


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState
    delivery_count: int = 0
    lock: AcquisitionLock | None = None


@dataclass(slots=True)
class Acquired:
    """What one fetch acquired from one partition: the batches holding the records, and the
    acquired offsets as (first, last, delivery count) ranges (ShareFetch's AcquiredRecords)."""
    records: bytes
    ranges: list[tuple[int, int, int]]


class SharePartition:
    def __init__(self, group_id: str, topic: str, partition: int, start_offset: int, *,
                 add_timer: Callable[[TimerTask], None], lock_duration_ms: int,
                 delivery_count_limit: int, max_in_flight: int,
                 on_available: Callable[[], None],
                 on_change: Callable[[SharePartition], None] = lambda share: None,
                 leader_epoch: int = -1, topic_id: uuid.UUID | None = None) -> None:
        self.group_id, self.topic, self.partition = group_id, topic, partition
        self.topic_id = topic_id
        self.leader_epoch = leader_epoch  # of the partition when this was started
        self.state_epoch = 0  # of the state its share coordinator keeps (reset: a new one)
        self._on_change = on_change  # a change the share coordinator should keep
        self.version = 0  # counts those changes; `persisted` is the last one written
        self.persisted = 0
        self.start_offset = start_offset  # the share-partition start offset (SPSO)
        self.next_offset = start_offset  # the first offset never acquired
        self.max_in_flight = max_in_flight
        self.in_flight: dict[int, InFlightRecord] = {}  # offsets in [start, next) not yet done
        self._add_timer = add_timer
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self._on_available = on_available  # records became Available: parked fetches may go

    # -- what a fetch can take ------------------------------------------------------------------

    def first_available(self) -> int | None:
        """The lowest in-flight offset a fetch may acquire again, if any."""
        return min((o for o, r in self.in_flight.items() if r.state == RecordState.AVAILABLE),
                   default=None)

    def can_acquire(self, end_offset: int) -> bool:
        """Records to hand out: released ones, or new ones below `end_offset` (the high
        watermark) while fewer than the limit are in flight."""
        if any(r.state == RecordState.AVAILABLE for r in self.in_flight.values()):
            return True
        return self.next_offset < end_offset and len(self.in_flight) < self.max_in_flight

    def read_from(self) -> int:
        first = self.first_available()
        return self.next_offset if first is None else first

    def move_start(self, log_start_offset: int) -> None:
        """Records below the log's start offset are gone (retention, DeleteRecords)."""
        if log_start_offset <= self.start_offset:
            return
        for offset in [o for o in self.in_flight if o < log_start_offset]:
            record = self.in_flight.pop(offset)
            if record.lock is not None:
                record.lock.release_one()
        self.start_offset = log_start_offset
        self.next_offset = max(self.next_offset, log_start_offset)
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        self._on_change(self)

    # -- what the share coordinator keeps -----------------------------------------------------

    def snapshot(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """(start offset, state batches): (first, last, delivery state, delivery count) ranges
        of the records in flight, an acquired one as Available."""
        batches: list[tuple[int, int, int, int]] = []
        for offset, record in self.records():
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED \
                else record.state
            last = batches[-1] if batches else None
            if last is not None and last[1] == offset - 1 and last[2:] == (
                    state, record.delivery_count):
                batches[-1] = (last[0], offset, state, record.delivery_count)
            else:
                batches.append((offset, offset, int(state), record.delivery_count))
        return self.start_offset, batches

    def restore(self, batches: list[tuple[int, int, int, int]] | tuple) -> None:
        """Take the in-flight records a share coordinator kept (at most `max_in_flight` of
        them: the rest are read from the log again)."""
        for first, last, state, count in batches:
            for offset in range(max(first, self.start_offset), last + 1):
                if len(self.in_flight) >= self.max_in_flight:
                    break
                self.in_flight[offset] = InFlightRecord(RecordState(state), count)
                self.next_offset = max(self.next_offset, offset + 1)
        self._advance_start()

    def acquire(self, member_id: str, read: bytes | memoryview, max_records: int,
                aborted: list[AbortedTxn] | None = None, *, record_limit: bool = False
                ) -> Acquired:
        """Acquire for `member_id` the records of the batches `read` from the log (starting at or
        below `read_from()`): Available in-flight ones and new ones, at most `max_records`
        (whole batches of new records, as Kafka aligns to batch boundaries; with `record_limit`,
        KIP-1206's record-limit mode, never more than `max_records`, a batch cut where the count
        is reached), under one lock. `aborted` (read_committed): the aborted transactions of the
        read; their records are Archived, never delivered."""
        lock = AcquisitionLock(self.lock_duration_ms, member_id, self._expire)
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        chunks: list[bytes | memoryview] = []
        view = memoryview(read)
        for pos, header in iter_batches(view):
            if len(taken) >= max_records:
                break
            # New records only while fewer than the limit are in flight; records in flight
            # already (released, expired) are always given again, or the share partition
            # could stall with the limit reached (Kafka's lock limit holds back new ones only)
            new_allowed = len(self.in_flight) < self.max_in_flight
            if header.base_offset >= self.next_offset and not new_allowed:
                break
            before = len(taken)
            dropped = aborted and header.is_transactional and not header.is_control and any(
                t.producer_id == header.producer_id
                and t.first_offset <= header.base_offset <= t.last_offset for t in aborted)
            batch_end = header.next_offset  # the first offset this batch leaves new
            for offset in range(max(header.base_offset, self.start_offset),
                                header.last_offset + 1):
                if offset >= self.next_offset and record_limit and len(taken) >= max_records:
                    batch_end = offset  # the rest of the batch stays new
                    break
                if offset < self.next_offset:
                    record = self.in_flight.get(offset)
                    if (record is None or record.state != RecordState.AVAILABLE
                            or len(taken) >= max_records):
                        continue
                elif not new_allowed:
                    break
                elif dropped:  # an aborted transaction's: never delivered
                    self.in_flight[offset] = InFlightRecord(RecordState.ARCHIVED)
                    continue
                elif header.is_control:  # a transaction marker: nothing to deliver
                    continue
                else:
                    record = self.in_flight[offset] = InFlightRecord(RecordState.AVAILABLE)
                record.state, record.lock = RecordState.ACQUIRED, lock
                record.delivery_count += 1
                lock.held += 1
                taken.append((offset, record.delivery_count))
            if new_allowed:
                self.next_offset = max(self.next_offset, batch_end)
            if len(taken) > before:
                chunks.append(view[pos:pos + header.size])
        self._advance_start()
        if lock.held:
            self._add_timer(lock)
        return Acquired(b"".join(chunks), _ranges(taken))

    # -- acknowledgements and releases ----------------------------------------------------------

    def acknowledge(self, member_id: str, batches: list[tuple[int, int, list[int]]], *,
                    renew: bool = False) -> None:
        """Apply a member's acknowledgement batches ((first, last, types): one type for the
        whole range, or one per offset). All or nothing: INVALID_RECORD_STATE when any offset
        is not acquired by this member, INVALID_REQUEST when a batch is malformed or names an
        offset twice (or Renew where `renew` does not allow it: before v2). The work is bounded
        by the records in flight, whatever the batches say. Renewed records stay the member's,
        under one new lock of the full duration; nothing of them is written."""
        changes: dict[int, tuple[InFlightRecord, int]] = {}
        for first, last, types in batches:
            span = last - first + 1
            if first < 0 or span <= 0 or len(types) not in (1, span) or any(
                    t not in AcknowledgeType._value2member_map_
                    or (t == AcknowledgeType.RENEW and not renew) for t in types):
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Invalid acknowledgement batch {first}-{last}")
            if len(changes) + span > len(self.in_flight):  # cannot all be acquired records
                raise KafkaError(ErrorCode.INVALID_RECORD_STATE, f"The records {first}-{last} "
                                 f"are not all acquired by member {member_id}")
            for i, offset in enumerate(range(first, last + 1)):
                if offset in changes:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Offset {offset} is acknowledged twice")
                record = self.in_flight.get(offset)
                if (record is None or record.state != RecordState.ACQUIRED
                        or record.lock is None or record.lock.member_id != member_id):
                    raise KafkaError(ErrorCode.INVALID_RECORD_STATE,
                                     f"The record at offset {offset} is not acquired by "
                                     f"member {member_id}")
                changes[offset] = (record, types[0] if len(types) == 1 else types[i])
        released, settled = False, False
        renewed = AcquisitionLock(self.lock_duration_ms, member_id, self._expire)
        for record, kind in changes.values():
            if kind == AcknowledgeType.RENEW:
                assert record.lock is not None
                record.lock.release_one()
                record.lock = renewed
                renewed.held += 1
                continue
            settled = True
            if kind == AcknowledgeType.RELEASE:
                released |= self._release(record)
            else:
                self._settle(record, RecordState.ACKNOWLEDGED if kind == AcknowledgeType.ACCEPT
                             else RecordState.ARCHIVED)
        if renewed.held:
            self._add_timer(renewed)
        self._advance_start()
        if settled:
            self._changed()
        if released:
            self._on_available()

    def release_member(self, member_id: str) -> None:
        """The member's share session closed: what it still holds is Available again."""
        self._release_where(lambda lock: lock.member_id == member_id)

    def _expire(self, lock: AcquisitionLock) -> None:
        self._release_where(lambda held_by: held_by is lock)

    def _release_where(self, holds: Callable[[AcquisitionLock], bool]) -> None:
        """Release the acquired records whose lock `holds` says."""
        released, changed = False, False
        for record in self.in_flight.values():
            if (record.state == RecordState.ACQUIRED and record.lock is not None
                    and holds(record.lock)):
                released |= self._release(record)
                changed = True
        self._advance_start()
        if changed:
            self._changed()
        if released:
            self._on_available()

    def _release(self, record: InFlightRecord) -> bool:
        """Acquired -> Available, or Archived at the delivery count limit; True if Available."""
        if record.delivery_count >= self.delivery_count_limit:
            self._settle(record, RecordState.ARCHIVED)
            return False
        self._settle(record, RecordState.AVAILABLE)
        return True

    @staticmethod
    def _settle(record: InFlightRecord, state: RecordState) -> None:
        if record.lock is not None:
            record.lock.release_one()
            record.lock = None
        record.state = state

    def _advance_start(self) -> None:
        """The start offset moves over records that are done (and offsets no batch held)."""
        in_flight, start = self.in_flight, self.start_offset
        while start < self.next_offset:
            record = in_flight.get(start)
            if record is not None and record.state not in (RecordState.ACKNOWLEDGED,
                                                           RecordState.ARCHIVED):
                break
            in_flight.pop(start, None)
            start += 1
        self.start_offset = start

    def close(self) -> None:
        """The partition is no longer led here: its locks go."""
        for record in self.in_flight.values():
            if record.lock is not None:
                record.lock.cancel()

    def records(self) -> Iterator[tuple[int, InFlightRecord]]:
        """The in-flight records in offset order (for views)."""
        return iter(sorted(self.in_flight.items()))


def _ranges(taken: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Consecutive offsets with one delivery count, as (first, last, delivery count)."""
    out: list[tuple[int, int, int]] = []
    for offset, count in taken:
        if out and out[-1][1] == offset - 1 and out[-1][2] == count:
            out[-1] = (out[-1][0], offset, count)
        else:
            out.append((offset, offset, count))
    return out
