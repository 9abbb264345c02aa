"""How a follower reaches its leader: the `LeaderEndpoint` interface (Fetch with `replica_id` and
OffsetForLeaderEpoch, as a follower speaks them to Kafka), and its in-process implementation for
the embedded cluster, which calls the leader broker's ReplicaManager directly."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.replication.delayed_fetch import FetchParams, FetchPartition
from broker.replication.fetch_session import FetchMetadata, PartitionKey
from broker.replication.fetch_session_handler import FetchSessionResponse
from protocol.errors import ErrorCode


@dataclass(slots=True)
class EpochEndOffset:
    """The leader's answer to OffsetsForLeaderEpoch for one partition."""
    error: ErrorCode = ErrorCode.NONE
    leader_epoch: int = -1
    end_offset: int = -1


class LeaderUnavailable(Exception):
    """The leader broker cannot be reached (stopped, or the connection failed)."""


class LeaderEndpoint(Protocol):
    # Whether answer_now reaches a parked fetch (in process); over TCP nothing does
    answers_when_asked: bool

    async def fetch(
        self, params: FetchParams, metadata: FetchMetadata, partitions: list[FetchPartition],
        forgotten: list[PartitionKey],
    ) -> FetchSessionResponse:
        """One Fetch in a fetch session (KIP-227): the partitions it names, those it forgets."""

    async def offsets_for_leader_epoch(
        self, requests: list[tuple[str, int, int, int]]
    ) -> list[EpochEndOffset]: ...

    def close(self) -> None:
        """The fetcher stopped: release the connection, if any."""

    def answer_now(self, replica_id: int) -> bool:
        """Have the leader answer this follower's parked fetch at once, if it can be reached so
        (in process: yes; over TCP no request does that, and the fetch answers by itself within
        replica.fetch.wait.max.ms). True when asked."""


class LeaderReplicaManager(Protocol):
    """What an in-process follower calls on the leader broker's ReplicaManager."""

    async def fetch_in_session(
        self, params: FetchParams, metadata: FetchMetadata, partitions: list[FetchPartition],
        forgotten: list[PartitionKey],
    ) -> FetchSessionResponse: ...

    def last_offset_for_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset: ...

    def complete_parked_fetch(self, replica_id: int) -> None: ...


class InProcessLeaderEndpoint:
    """The leader's ReplicaManager, called directly; `lookup` returns None while it is down."""

    answers_when_asked = True

    def __init__(self, lookup: Callable[[], LeaderReplicaManager | None],
                 delay_s: Callable[[], float] = lambda: 0.0) -> None:
        self._lookup = lookup
        self._delay_s = delay_s  # one way, each way: a simulated slow link (0 in process)

    def _leader(self) -> LeaderReplicaManager:
        rm = self._lookup()
        if rm is None:
            raise LeaderUnavailable("leader broker is not running")
        return rm

    async def fetch(self, params, metadata, partitions, forgotten):
        delay = self._delay_s()
        if delay:
            await asyncio.sleep(delay)
        answer = await self._leader().fetch_in_session(params, metadata, partitions, forgotten)
        if delay:
            await asyncio.sleep(delay)
        return answer

    async def offsets_for_leader_epoch(self, requests):
        rm = self._leader()
        return [rm.last_offset_for_leader_epoch(t, p, cur, epoch) for t, p, cur, epoch in requests]

    def close(self) -> None:
        """Nothing to release: the leader is called in process."""

    def answer_now(self, replica_id: int) -> bool:
        rm = self._lookup()
        if rm is not None:
            rm.complete_parked_fetch(replica_id)
        return True
