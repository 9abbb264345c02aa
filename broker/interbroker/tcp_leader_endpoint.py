"""TcpLeaderEndpoint: a follower's way to its leader in the multi-process cluster — Fetch with the
follower's `replica_id` and OffsetForLeaderEpoch over the leader's listener, one connection per
(follower, leader), as Kafka's RemoteLeaderEndPoint; its Fetches carry the follower's fetch
session (KIP-227)."""

from __future__ import annotations

from collections.abc import Callable

from broker.interbroker.broker_client import BrokerClient, BrokerUnreachable
from broker.replication.delayed_fetch import FetchParams, FetchPartition, FetchPartitionData
from broker.replication.fetch_session import FetchMetadata, PartitionKey
from broker.replication.fetch_session_handler import FetchSessionResponse
from broker.replication.leader_endpoint import EpochEndOffset, LeaderUnavailable
from broker.security.client_security import ClientSecurity
from protocol.errors import ErrorCode

FETCH_KEY, FETCH_VERSION = 1, 12
OFFSET_FOR_LEADER_EPOCH_KEY, OFFSET_FOR_LEADER_EPOCH_VERSION = 23, 4
REQUEST_SLACK_S = 10.0  # beyond the fetch's own max wait


class TcpLeaderEndpoint:
    answers_when_asked = False  # a parked fetch answers within its max wait, by itself

    def __init__(self, follower_id: int, leader_id: int,
                 address: Callable[[], tuple[str, int] | None],
                 security: ClientSecurity | None = None) -> None:
        self.follower_id = follower_id
        self.security = security
        self.leader_id = leader_id
        self._address = address  # the leader's advertised address, as metadata knows it now
        self._client: BrokerClient | None = None

    def _connection(self) -> BrokerClient:
        address = self._address()
        if address is None:
            raise LeaderUnavailable(f"broker {self.leader_id} has no known address")
        if self._client is None or (self._client.host, self._client.port) != address:
            if self._client is not None:
                self._client.close()
            self._client = BrokerClient(*address, client_id=f"broker-{self.follower_id}-fetcher",
                                        security=self.security)
        return self._client

    async def _request(self, api_key: int, version: int, body: dict, timeout_s: float):
        try:
            return await self._connection().request(api_key, version, body, timeout_s=timeout_s)
        except BrokerUnreachable as exc:
            raise LeaderUnavailable(str(exc)) from None

    async def fetch(self, params: FetchParams, metadata: FetchMetadata,
                    partitions: list[FetchPartition],
                    forgotten: list[PartitionKey]) -> FetchSessionResponse:
        topics: dict[str, list[dict]] = {}
        for p in partitions:
            topics.setdefault(p.topic, []).append({
                "partition": p.partition, "current_leader_epoch": p.current_leader_epoch,
                "fetch_offset": p.fetch_offset, "last_fetched_epoch": -1,
                "log_start_offset": p.log_start_offset,
                "partition_max_bytes": p.partition_max_bytes})
        forgotten_topics: dict[str, list[int]] = {}
        for topic, partition in forgotten:
            forgotten_topics.setdefault(topic, []).append(partition)
        response = await self._request(FETCH_KEY, FETCH_VERSION, {
            "replica_id": params.replica_id, "max_wait_ms": params.max_wait_ms,
            "min_bytes": params.min_bytes, "max_bytes": params.max_bytes,
            "isolation_level": params.isolation_level, "session_id": metadata.session_id,
            "session_epoch": metadata.epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps}
                                      for t, ps in forgotten_topics.items()],
            "rack_id": ""},
            params.max_wait_ms / 1000 + REQUEST_SLACK_S)
        return FetchSessionResponse(ErrorCode(response.error_code), response.session_id, {
            (t.topic, p.partition_index): FetchPartitionData(
                ErrorCode(p.error_code), p.high_watermark, p.last_stable_offset,
                p.log_start_offset, bytes(p.records or b""))
            for t in response.responses for p in t.partitions})

    async def offsets_for_leader_epoch(
        self, requests: list[tuple[str, int, int, int]]
    ) -> list[EpochEndOffset]:
        topics: dict[str, list[dict]] = {}
        for topic, partition, current_epoch, epoch in requests:
            topics.setdefault(topic, []).append({
                "partition": partition, "current_leader_epoch": current_epoch,
                "leader_epoch": epoch})
        response = await self._request(OFFSET_FOR_LEADER_EPOCH_KEY, OFFSET_FOR_LEADER_EPOCH_VERSION, {
            "replica_id": self.follower_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]},
            REQUEST_SLACK_S)
        found = {(t.topic, p.partition): p for t in response.topics for p in t.partitions}
        out = []
        for topic, partition, _, _ in requests:
            data = found.get((topic, partition))
            out.append(EpochEndOffset(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if data is None else
                       EpochEndOffset(ErrorCode(data.error_code), data.leader_epoch,
                                      data.end_offset))
        return out

    def answer_now(self, replica_id: int) -> bool:
        return False  # no request wakes a parked fetch: it answers within its max wait

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
