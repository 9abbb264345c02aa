"""One topic-partition as this broker hosts it: leader or follower, leader epoch, ISR, high watermark.

As leader it tracks every follower's log end offset (from the fetch offsets followers send) and
the last time each was caught up; the high watermark is the smallest LEO over the ISR. A follower
that has not caught up for `replica.lag.time.max.ms` leaves the ISR; one that reaches the high
watermark comes back. ISR changes are requested through `request_isr_change`: the replica manager
persists them (conditionally on the partition version, one at a time per partition) and applies
the accepted ISR once written, as Kafka's leaders do with AlterPartition; until then the committed
ISR stands (for the high watermark too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.metadata.partition_state import LeaderAndIsr
from protocol.errors import ErrorCode
from protocol.records import BatchHeader, decompression_limit, iter_batches
from storage.append_origin import AppendOrigin
from storage.log import DECODE_OFF_LOOP_BYTES, CheckedRecords, Log
from storage.log_info import LogAppendInfo
from storage.segment import first_record_at_or_after, offset_of_max_timestamp


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower."""

    log_end_offset: int = -1
    log_start_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0


# request_isr_change(partition, new_isr): ask for an ISR change (a no-op while one is in flight)
RequestIsrChange = Callable[["Partition", list[int]], None]


@dataclass(slots=True)
class Partition:
    """A partition hosted here: its log, leader, ISR and high watermark."""
    topic: str
    index: int
    log: Log
    local_broker_id: int
    now_ms: Callable[[], int]
    request_isr_change: RequestIsrChange
    leader_id: int = -1
    leader_epoch: int = -1
    partition_version: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict)
    hw_ignores_isr: bool = False  # simulation.defect=high-watermark-ignores-isr: a deliberate bug

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def _apply(self, state: LeaderAndIsr) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_version = state.partition_version
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)

    def make_leader(self, state: LeaderAndIsr) -> bool:
        """Become leader; followers start as caught up now (Kafka resets them the same way)."""
        was_leader = self.is_leader
        self._apply(state)
        now = self.now_ms()
        self.remote_replicas = {
            r: ReplicaState(last_caught_up_time_ms=now if r in self.isr else 0)
            for r in self.replicas
            if r != self.local_broker_id
        }
        self.log.leader_epoch_cache.assign(self.leader_epoch, self.log.log_end_offset)
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(self, state: LeaderAndIsr) -> bool:
        """Follow `state.leader`; True when the leader changed (the fetcher must move)."""
        changed = self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
        self._apply(state)
        self.remote_replicas = {}
        return changed

    def update_isr(self, state: LeaderAndIsr) -> None:
        self.isr = list(state.isr)
        self.partition_version = state.partition_version

    # -- leader side ------------------------------------------------------------------------

    def append_records_as_leader(
        self, records: bytes | memoryview, *, checked: CheckedRecords | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin,
                                         checked=checked)
        self.maybe_increment_high_watermark()  # with the leader alone in the ISR, HW = LEO now
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """Whether an acks=all append ending at `required_offset` is settled (Kafka's
        checkEnoughReplicasReachOffset): once the high watermark covers it, with
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas meanwhile;
        at once with NOT_LEADER_OR_FOLLOWER when leadership moved."""
        if not self.is_leader:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.isr) < self.log.config.min_insync_replicas:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    def is_remote_replica(self, replica_id: int) -> bool:
        """True for a replica of this partition other than this broker (the followers a leader
        tracks); a fetch from any other replica_id is refused."""
        return replica_id in self.remote_replicas

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> bool:
        """A follower's fetch from `fetch_offset` passed every check and was read: that offset is
        its LEO. True when the HW moved. The caller checks first; an unknown replica is ignored."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None or fetch_offset > self.log.log_end_offset:
            return False
        replica.log_start_offset = log_start_offset
        now = self.now_ms()
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            replica.last_caught_up_time_ms = now
        elif fetch_offset >= replica.last_fetch_leader_log_end_offset:
            # It has everything the leader had at its previous fetch: caught up as of then.
            replica.last_caught_up_time_ms = max(
                replica.last_caught_up_time_ms, replica.last_fetch_time_ms
            )
        replica.log_end_offset = fetch_offset
        replica.last_fetch_leader_log_end_offset = leader_leo
        replica.last_fetch_time_ms = now
        self.maybe_expand_isr(replica_id)
        return self.maybe_increment_high_watermark()

    def maybe_expand_isr(self, replica_id: int) -> None:
        replica = self.remote_replicas[replica_id]
        if replica_id in self.isr or replica.log_end_offset < self.log.high_watermark:
            return
        epoch_start = next((start for epoch, start in self.log.leader_epoch_cache.epoch_entries()
                            if epoch == self.leader_epoch), None)
        if epoch_start is not None and replica.log_end_offset < epoch_start:
            return  # it has not yet reached this leader's epoch
        self.request_isr_change(self, sorted([*self.isr, replica_id]))

    def out_of_sync_replicas(self, max_lag_ms: int) -> list[int]:
        """ISR followers that are not caught up (Kafka's isCaughtUp): behind the leader's log end
        offset and not caught up with it for `max_lag_ms`. One at the log end offset is in sync
        however long ago it fetched, so an idle partition keeps its followers (a dead one leaves
        through the controller)."""
        now, leader_leo = self.now_ms(), self.log.log_end_offset
        out = []
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(r, ReplicaState())
            if replica.log_end_offset != leader_leo \
                    and now - replica.last_caught_up_time_ms > max_lag_ms:
                out.append(r)
        return out

    def maybe_shrink_isr(self, max_lag_ms: int) -> bool:
        """Drop followers that lag too long; True when the HW moved as a result."""
        if not self.is_leader:
            return False
        lagging = self.out_of_sync_replicas(max_lag_ms)
        if not lagging:
            return False
        self.request_isr_change(self, [r for r in self.isr if r not in lagging])
        return self.maybe_increment_high_watermark()

    @property
    def low_watermark(self) -> int:
        """The smallest log start offset over the ISR (Kafka's lowWatermarkIfLeader, which takes
        every live replica): DeleteRecords is done when this reaches its offset."""
        low = self.log.log_start_offset
        for r in self.isr:
            replica = self.remote_replicas.get(r)
            if r != self.local_broker_id and replica is not None:
                low = min(low, replica.log_start_offset)
        return low

    def maybe_increment_high_watermark(self) -> bool:
        """HW = the smallest log end offset over the ISR (the leader's own included)."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for r in () if self.hw_ignores_isr else self.isr:
            if r != self.local_broker_id:
                replica = self.remote_replicas.get(r)
                new_hw = min(new_hw, replica.log_end_offset if replica else -1)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            return True
        return False

    # -- follower side ----------------------------------------------------------------------

    def append_records_as_follower(
        self, records: bytes, leader_high_watermark: int, leader_log_start_offset: int = -1
    ) -> None:
        if records:
            self.log.append_as_follower(records)
        self.log.high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        # Follow the leader's log start offset (DeleteRecords, retention), up to what we have.
        self.log.increment_log_start_offset(min(leader_log_start_offset, self.log.high_watermark))

    async def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """The first record with a timestamp >= `timestamp` (offset, timestamp, its batch's leader
        epoch). The log is walked by offset, so it may change while a batch is decoded."""
        log = self.log
        from_offset = log.log_start_offset
        while (candidate := log.timestamp_candidate(timestamp, from_offset)) is not None:
            header, batch = candidate
            found = await _decode(first_record_at_or_after, header, batch, timestamp,
                                  log.log_start_offset,
                                  decompression_limit(log.config.max_message_bytes))
            if found is not None:
                return found[0], found[1], header.partition_leader_epoch
            from_offset = header.next_offset
        return None

    async def offset_of_max_timestamp(self) -> tuple[int, int, int] | None:
        """ListOffsets' MAX_TIMESTAMP: the first record carrying the log's largest timestamp,
        inside its batch (not the batch's last offset), as Kafka 3.9's fetchOffsetByTimestamp."""
        candidate = self.log.max_timestamp_candidate()
        if candidate is None:
            return None
        header, batch = candidate
        offset = await _decode(offset_of_max_timestamp, header, batch,
                               decompression_limit(self.log.config.max_message_bytes))
        if offset is None:
            return None
        return offset, header.max_timestamp, header.partition_leader_epoch

    def replica_states(self) -> list[dict]:
        """Per replica LEO, HW and lag (and this replica's last stable offset), for the control API."""
        leo = self.log.log_end_offset
        out = [{"broker": self.local_broker_id, "log_end_offset": leo,
                "high_watermark": self.log.high_watermark,
                "last_stable_offset": self.log.last_stable_offset, "lag": 0}]
        for r, state in sorted(self.remote_replicas.items()):
            out.append({"broker": r, "log_end_offset": state.log_end_offset,
                        "high_watermark": None,
                        "lag": max(0, leo - state.log_end_offset) if state.log_end_offset >= 0 else None})
        return out


async def _decode(function: Callable[..., Any], header: BatchHeader, *args: Any) -> Any:
    """Compressed or large batches are decoded in a worker thread: inflating up to the
    decompression bound and decoding every record must not hold the event loop."""
    if header.compression or len(args[0]) > DECODE_OFF_LOOP_BYTES:
        return await asyncio.to_thread(function, *args)
    return function(*args)


def marker_producer_ids(records: bytes | memoryview) -> Iterator[int]:
    """The producers whose transactions the markers (control batches) among these records end."""
    return (header.producer_id for _, header in iter_batches(records) if header.is_control)


class HostedPartitions(Protocol):
    """The replica manager as the delayed operations see it: the partitions hosted here, each
    looked up with the error a request gets for it (Kafka's getPartitionOrException)."""

    def hosted_partition(self, topic: str, index: int) -> Partition:
        """KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION raised."""
        ...

    def partition_with_epoch(self, topic: str, index: int, current_leader_epoch: int, *,
                             require_leader: bool = True) -> Partition:
        """As hosted_partition, then FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for an epoch
        other than the partition's (-1: none named), NOT_LEADER_OR_FOLLOWER on a follower."""
        ...
