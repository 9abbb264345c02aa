"""Raw-protocol helpers for the group coordinator tests: a one-broker cluster on the manual clock,
request bodies, and members that join, sync and heartbeat over their own connections."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from broker.server.cluster import Cluster
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import create_topic
from timer import ManualClock

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 9, 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
SESSION_MS, REBALANCE_MS = 1_000, 2_000
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
                   "group.min.session.timeout.ms": "100"}


async def start_cluster(tmp_path, overrides: dict[str, str] | None = None) -> Cluster:
    cluster = Cluster(cluster_config(tmp_path, {**GROUP_OVERRIDES, **(overrides or {})}), 1,
                      clock=ManualClock(1_000_000))
    await cluster.start()
    broker = cluster.brokers[0]
    await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 10_000)
    client = await RawClient.connect(broker.port)
    await create_topic(client, "t", 4)
    response = await client.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert response.error_code in (0, 15)  # the first lookup creates __consumer_offsets
    await client.close()
    await until(lambda: broker.group_coordinator.manager.owned == {0})
    return cluster


def join_body(member_id: str = "", protocols=(("range", b"sub"),), *, group: str = "g",
              session: int = SESSION_MS, rebalance: int = REBALANCE_MS,
              instance: str | None = None, protocol_type: str = "consumer") -> dict:
    return {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols]}


@dataclass
class Member:
    """One group member on its own connection (as clients keep coordinator traffic apart)."""

    client: RawClient
    group: str = "g"
    member_id: str = ""
    generation: int = -1
    instance: str | None = None
    protocols: tuple = (("range", b"sub"),)
    version: int = 5
    last_join: object = None
    pending: list = field(default_factory=list)

    @classmethod
    async def connect(cls, port: int, **kw) -> Member:
        return cls(await RawClient.connect(port), **kw)

    async def send_join(self, **kw) -> int:
        body = join_body(self.member_id, self.protocols, group=self.group, instance=self.instance, **kw)
        return await self.client.send(JOIN, self.version, body)

    async def receive_join(self, correlation_id: int):
        response = await self.client.receive(JOIN, self.version, correlation_id)
        self.last_join = response
        if response.error_code == 0:
            self.member_id, self.generation = response.member_id, response.generation_id
        return response

    async def join(self, **kw):
        """Join, answering MEMBER_ID_REQUIRED by rejoining with the given id."""
        response = await self.receive_join(await self.send_join(**kw))
        if response.error_code == 79:
            self.member_id = response.member_id
            response = await self.receive_join(await self.send_join(**kw))
        return response

    async def send_sync(self, assignments: dict[str, bytes] | None = None) -> int:
        return await self.client.send(SYNC, 3, {
            "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": self.instance,
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]})

    async def sync(self, assignments: dict[str, bytes] | None = None):
        return await self.client.receive(SYNC, 3, await self.send_sync(assignments))

    async def heartbeat(self, generation: int | None = None, member_id: str | None = None) -> int:
        response = await self.client.request(HEARTBEAT, 3, {
            "group_id": self.group, "member_id": self.member_id if member_id is None else member_id,
            "generation_id": self.generation if generation is None else generation,
            "group_instance_id": self.instance})
        return response.error_code

    async def commit(self, offsets: dict[tuple[str, int], int], version: int = 8) -> dict:
        topics: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_metadata": "m"})
        response = await self.client.request(OFFSET_COMMIT, version, {
            "group_id": self.group, "generation_id_or_member_epoch": self.generation,
            "member_id": self.member_id, "group_instance_id": self.instance,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    async def close(self) -> None:
        await self.client.close()


async def advance(cluster: Cluster, ms: int) -> None:
    """Move the manual clock and let the reaper run what became due."""
    cluster.clock.advance(ms)
    timer, clock = cluster.timer, cluster.clock
    await until(lambda: (due := timer.next_expiration_ms()) is None or due > clock.now_ms())
    for _ in range(20):
        await asyncio.sleep(0)


def group_state(cluster: Cluster, group: str = "g") -> str | None:
    found = cluster.brokers[0].group_coordinator.group(group)
    return None if found is None else found.state.value
