"""ShareCoordinator: the share-partition states of the `__share_group_state` partitions this
broker leads. A write appends the share partition's whole snapshot (acks=-1) and then keeps it;
a read answers from memory. A partition it is elected to lead is loaded from its log first
(COORDINATOR_LOAD_IN_PROGRESS meanwhile); one it resigns is forgotten.

A share partition is placed as Kafka places it (metadata/coordinator_keys.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.coordinator.group.group_metadata_manager import APPEND_ERRORS, LOAD_CHUNK_BYTES
from broker.logs import get_logger
from broker.metadata.coordinator_keys import share_state_partition
from broker.metadata.topic_names import SHARE_STATE_TOPIC
from protocol.errors import ErrorCode
from protocol.records import decode_batch, encode_batch, iter_batches
from protocol.share_records import (
    ShareSnapshot,
    decode_share_record,
    share_snapshot_key,
    share_snapshot_value,
)
from storage.append_origin import AppendOrigin

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.metadata_cache import MetadataCache
    from broker.replication.replica_manager import ReplicaManager

log = get_logger("kafka_sim.share_coordinator")

ShareKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


class ShareCoordinator:
    def __init__(self, config: BrokerConfig, broker_id: int, replica_manager: ReplicaManager,
                 cache: MetadataCache, time_ms: Callable[[], int]) -> None:
        self.config = config
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.cache = cache
        self.time_ms = time_ms
        self.states: dict[ShareKey, ShareSnapshot] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, asyncio.Task] = {}

    @property
    def num_partitions(self) -> int:
        topic = self.cache.topic(SHARE_STATE_TOPIC)
        return topic.num_partitions if topic else \
            self.config["share.coordinator.state.topic.num.partitions"]

    def partition_for(self, key: ShareKey) -> int:
        return share_state_partition(*key, self.num_partitions)

    def _status(self, key: ShareKey) -> ErrorCode:
        partition = self.partition_for(key)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE if partition in self.owned else ErrorCode.NOT_COORDINATOR

    # -- ReadShareGroupState / WriteShareGroupState --------------------------------------------

    def read(self, key: ShareKey) -> tuple[ErrorCode, ShareSnapshot | None]:
        """The share partition's state (None when it was never written)."""
        error = self._status(key)
        return error, (self.states.get(key) if error == ErrorCode.NONE else None)

    async def write(self, key: ShareKey, snapshot: ShareSnapshot) -> ErrorCode:
        """Keep the share partition's new state once it is in the log (acks=-1). A write from
        an older leader epoch than the state's is fenced (FENCED_LEADER_EPOCH), as Kafka's."""
        error = self._status(key)
        if error != ErrorCode.NONE:
            return error
        current = self.states.get(key)
        if current is not None and snapshot.state_epoch < current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH  # reset since (AlterShareGroupOffsets)
        if current is not None and snapshot.leader_epoch < current.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return await self._append(key, snapshot)

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        """A new state at `start_offset`, nothing in flight (InitializeShareGroupState, as
        AlterShareGroupOffsets resets a partition): its state epoch fences the leader's writes
        of the state before (FENCED_STATE_EPOCH), and the leader starts again from this one."""
        error = self._status(key)
        if error != ErrorCode.NONE:
            return error
        current = self.states.get(key)
        if current is not None and state_epoch <= current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        leader_epoch = current.leader_epoch if current is not None else -1
        return await self._append(key, ShareSnapshot(state_epoch, leader_epoch, start_offset))

    async def delete(self, key: ShareKey) -> ErrorCode:
        """The share partition's state goes (a tombstone; DeleteShareGroupState, as
        DeleteShareGroupOffsets and a deleted group ask): its next start is a new one."""
        error = self._status(key)
        if error != ErrorCode.NONE:
            return error
        if key not in self.states:
            return ErrorCode.NONE
        error = await self._append_record(key, None)
        if error == ErrorCode.NONE:
            self.states.pop(key, None)
        return error

    async def _append_record(self, key: ShareKey, value: bytes | None) -> ErrorCode:
        tp = (SHARE_STATE_TOPIC, self.partition_for(key))
        batch = encode_batch([(share_snapshot_key(*key), value, [], self.time_ms())])
        results = await self.replica_manager.produce(
            -1, self.config["share.coordinator.write.timeout.ms"], {tp: batch},
            origin=AppendOrigin.COORDINATOR)
        error = results[tp].error
        return ErrorCode.NONE if error == ErrorCode.NONE else APPEND_ERRORS.get(error, error)

    async def _append(self, key: ShareKey, snapshot: ShareSnapshot) -> ErrorCode:
        current = self.states.get(key)
        epoch = current.snapshot_epoch + 1 if current is not None else 0
        snapshot = ShareSnapshot(snapshot.state_epoch, snapshot.leader_epoch,
                                 snapshot.start_offset, snapshot.batches, epoch)
        error = await self._append_record(key, share_snapshot_value(snapshot))
        if error != ErrorCode.NONE:
            return error
        latest = self.states.get(key)
        if latest is None or latest.snapshot_epoch < snapshot.snapshot_epoch:
            self.states[key] = snapshot
        return ErrorCode.NONE

    # -- leadership of the state topic's partitions ---------------------------------------------

    def on_leadership(self, partition: int, is_leader: bool) -> None:
        if not is_leader:
            task = self.loading.pop(partition, None)
            if task is not None:
                task.cancel()
            self.owned.discard(partition)
            for key in [k for k in self.states if self.partition_for(k) == partition]:
                del self.states[key]
            return
        if partition in self.owned or partition in self.loading:
            return
        self.loading[partition] = asyncio.get_running_loop().create_task(self._load(partition))

    async def _load(self, partition: int) -> None:
        """Replay the partition's snapshots (the last per key wins), chunk by chunk: each read on
        the loop, decoded in a worker thread."""
        await asyncio.sleep(0)  # answer LOAD_IN_PROGRESS until the log has been read
        loaded: dict[ShareKey, ShareSnapshot | None] = {}
        try:
            hosted = self.replica_manager.partitions.get((SHARE_STATE_TOPIC, partition))
            for data in (hosted.log.chunks(LOAD_CHUNK_BYTES) if hosted is not None else ()):
                await asyncio.to_thread(_replay, data, loaded)
        except Exception:
            log.exception("loading a share state partition failed; it answers NOT_COORDINATOR",
                          broker_id=self.broker_id, partition=partition)
            self.loading.pop(partition, None)
            return
        self.loading.pop(partition, None)
        self.owned.add(partition)
        self.states.update({k: v for k, v in loaded.items() if v is not None})
        log.info("loaded share state partition", broker_id=self.broker_id, partition=partition,
                 share_partitions=sum(v is not None for v in loaded.values()))

    def shutdown(self) -> None:
        for partition in list(self.owned | set(self.loading)):
            self.on_leadership(partition, False)


def _replay(data: bytes, loaded: dict[ShareKey, ShareSnapshot | None]) -> None:
    for pos, header in iter_batches(data):
        if header.is_control:
            continue
        for record in decode_batch(data, pos)[1]:
            decoded = decode_share_record(record.key, record.value) if record.key else None
            if decoded is not None:
                loaded[decoded[0]] = decoded[1]
