"""SharePersister: how a share partition's leader reads and writes the partition's durable state
at its share coordinator (Kafka's DefaultStatePersister): the coordinator is the leader of the
share partition's `__share_group_state` partition; the requests are ReadShareGroupState and
WriteShareGroupState, a direct call in the embedded cluster and over TCP between processes.

A state that cannot be read (no state topic yet, no leader, a coordinator loading or away) is
tried again for a few seconds, then `UNAVAILABLE`: the share partition waits for a later fetch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from broker.logs import get_logger
from broker.metadata.coordinator_keys import share_state_partition
from broker.metadata.topic_names import SHARE_STATE_TOPIC
from protocol.errors import ErrorCode
from protocol.share_records import ShareSnapshot

if TYPE_CHECKING:
    from broker.metadata.metadata_cache import MetadataCache

log = get_logger("kafka_sim.share")

INITIALIZE_SHARE_GROUP_STATE, READ_SHARE_GROUP_STATE, WRITE_SHARE_GROUP_STATE = 83, 84, 85
DELETE_SHARE_GROUP_STATE = 86
UNAVAILABLE = object()
READ_WAIT_S, RETRY_BACKOFF_S = 5.0, 0.02
RETRIABLE = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE})


class ShareStateTransport(Protocol):
    async def share_state(self, broker_id: int, api_key: int, body: dict) -> dict: ...


class SharePersister:
    def __init__(self, cache: MetadataCache, transport: ShareStateTransport,
                 ensure_state_topic: Callable[[], Awaitable[None]]) -> None:
        self.cache = cache
        self.transport = transport
        self._ensure_state_topic = ensure_state_topic

    def _coordinator(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        topic = self.cache.topic(SHARE_STATE_TOPIC)
        if topic is None:
            return None
        index = share_state_partition(group_id, topic_id, partition, topic.num_partitions)
        state = self.cache.partition_state(SHARE_STATE_TOPIC, index)
        return state.leader if state is not None and state.leader >= 0 else None

    async def _call(self, group_id: str, topic_id: uuid.UUID, partition: int, api_key: int,
                    fields: dict) -> dict | None:
        """The one partition's result, or None when the coordinator cannot be reached."""
        coordinator = self._coordinator(group_id, topic_id, partition)
        if coordinator is None:
            if self.cache.topic(SHARE_STATE_TOPIC) is None:
                await self._ensure_state_topic()
            return None
        body = {"group_id": group_id, "topics": [{"topic_id": topic_id.bytes, "partitions": [
            {"partition": partition, **fields}]}]}
        try:
            answer = await self.transport.share_state(coordinator, api_key, body)
        except Exception as exc:  # unreachable, timed out: a later request tries again
            log.debug("share coordinator not reached", broker_id=coordinator, reason=str(exc))
            return None
        return answer["results"][0]["partitions"][0]

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> ShareSnapshot | None | object:
        """The kept state (None: never written), or UNAVAILABLE. A share group's first fetch
        may find the state topic still being made, its leaders being elected or its partition
        loading: it tries again for up to READ_WAIT_S (the request waits, not the loop)."""
        for _ in range(int(READ_WAIT_S / RETRY_BACKOFF_S)):
            result = await self._call(group_id, topic_id, partition, READ_SHARE_GROUP_STATE,
                                      {"leader_epoch": leader_epoch})
            if result is not None and result["error_code"] == ErrorCode.NONE:
                if result["start_offset"] < 0:
                    return None
                return ShareSnapshot(result["state_epoch"], leader_epoch, result["start_offset"],
                                     tuple((b["first_offset"], b["last_offset"],
                                            b["delivery_state"], b["delivery_count"])
                                           for b in result["state_batches"]))
            if result is not None and result["error_code"] not in RETRIABLE:
                return UNAVAILABLE
            await asyncio.sleep(RETRY_BACKOFF_S)
        return UNAVAILABLE

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> ErrorCode:
        result = await self._call(group_id, topic_id, partition, INITIALIZE_SHARE_GROUP_STATE,
                                  {"state_epoch": state_epoch, "start_offset": start_offset})
        if result is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode(result["error_code"])

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        result = await self._call(group_id, topic_id, partition, DELETE_SHARE_GROUP_STATE, {})
        if result is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode(result["error_code"])

    async def delete_topic(self, group_id: str, topic: str, partitions: Iterable[int]
                           ) -> ErrorCode:
        """The group's state of these partitions of `topic` removed at their share coordinators
        (DeleteShareGroupOffsets, DeleteGroups); the first error, else NONE (also when nothing
        was ever kept)."""
        info = self.cache.topic(topic)
        if info is None or self.cache.topic(SHARE_STATE_TOPIC) is None:
            return ErrorCode.NONE
        error = ErrorCode.NONE
        for index in partitions:
            deleted = await self.delete(group_id, info.topic_id, index)
            if deleted != ErrorCode.NONE and error == ErrorCode.NONE:
                error = deleted
        return error

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int,
                    start_offset: int, batches: list[tuple[int, int, int, int]],
                    state_epoch: int = 0) -> ErrorCode:
        result = await self._call(group_id, topic_id, partition, WRITE_SHARE_GROUP_STATE, {
            "state_epoch": state_epoch, "leader_epoch": leader_epoch,
            "start_offset": start_offset,
            "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s,
                               "delivery_count": c} for f, la, s, c in batches]})
        if result is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode(result["error_code"])
