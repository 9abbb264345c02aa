"""Cluster metadata on the multi-process ZooKeeper cluster. A topic of 2,000 partitions created
with confluent-kafka's admin client, then a controller failover (kill -9), while every broker
keeps answering another connection: no broker's event loop is held for a second (the
controller's store calls are pipelined batches, its LeaderAndIsr requests chunks). A config
change reaches every process through Kafka's /config/changes notification."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kazoo.client import KazooClient

from tests.integration.raw_client import RawClient
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow

API_VERSIONS, METADATA, DESCRIBE_CONFIGS = 18, 3, 32
PARTITIONS = 2_000
MAX_ANSWER_S = 1.0


class AnswerProbe:
    """One connection asking a broker ApiVersions every 5 ms: the longest wait for an answer
    bounds how long that broker's event loop was held."""

    def __init__(self, port: int) -> None:
        self.port, self.longest = port, 0.0

    async def run(self) -> None:
        client = await RawClient.connect(self.port)
        try:
            while True:
                started = time.perf_counter()
                await client.request(API_VERSIONS, 0, {})
                self.longest = max(self.longest, time.perf_counter() - started)
                await asyncio.sleep(0.005)
        finally:
            await client.close()


async def led(port: int, topic: str) -> int:
    client = await RawClient.connect(port)
    try:
        response = await client.request(METADATA, 1, {"topics": [{"name": topic}]})
    finally:
        await client.close()
    return sum(p.leader_id >= 0 for t in response.topics if t.name == topic for p in t.partitions)


async def until_async(check, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.5)  # each answer lists every partition: ask seldom


def controller_of(cluster: ProcessCluster, via: int) -> int:  # -1: none now
    return next((b["id"] for b in cluster.brokers(via) if b["controller"]), -1)


@pytest.fixture
def cluster(zk_connect, tmp_path):
    c = ProcessCluster(zk_connect, tmp_path, overrides={"default.replication.factor": "1"})
    c.start()
    c.wait_until_all_registered()
    yield c
    c.stop()


async def test_thousands_of_partitions_and_a_failover_hold_no_loop_for_a_second(cluster):
    probes = {i: AnswerProbe(cluster.ports[i]) for i in cluster.ids}
    tasks = [asyncio.create_task(p.run()) for p in probes.values()]
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        [future] = admin.create_topics([NewTopic("wide", PARTITIONS, 1)],
                                       request_timeout=120).values()
        started = time.monotonic()
        await asyncio.to_thread(future.result, 120)
        for i in cluster.ids:
            await until_async(lambda i=i: _all_led(cluster.ports[i]), f"broker {i} to lead all")
        created_s = time.monotonic() - started
        assert {i: p.longest < MAX_ANSWER_S for i, p in probes.items()} == dict.fromkeys(
            cluster.ids, True), ({i: p.longest for i, p in probes.items()}, created_s)

        # Failover: the next controller reads all 2,000 states and tells every broker again.
        old = controller_of(cluster, cluster.ids[0])
        cluster.kill(old, signal.SIGKILL)
        tasks[old].cancel()
        survivors = [i for i in cluster.ids if i != old]
        for p in probes.values():
            p.longest = 0.0
        (new,) = await asyncio.to_thread(wait_until, lambda: _new_controller(cluster, survivors),
                                         "a new controller")
        log = cluster.root / f"broker-{new}.log"
        await asyncio.to_thread(wait_until, lambda: "ready to serve as the new controller"
                                in log.read_text(errors="replace"), "the new controller's load")
        longest = {i: probes[i].longest for i in survivors}
        assert all(s < MAX_ANSWER_S for s in longest.values()), longest
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _all_led(port: int) -> bool:
    return await led(port, "wide") == PARTITIONS


def _new_controller(cluster: ProcessCluster, survivors: list[int]) -> tuple[int] | None:
    """(its id,) once a survivor is controller: a tuple, as broker 0 is a falsy answer to
    wait_until (the test failed whenever broker 0 took over)."""
    found = controller_of(cluster, survivors[0])
    return (found,) if found in survivors else None


async def test_a_config_change_reaches_every_process_through_a_change_notification(cluster,
                                                                                  zk_connect):
    """AlterConfigs (confluent-kafka) writes the config node and a /config/changes notification;
    every broker process, which read the topic's config once, shows the new value."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    [future] = admin.create_topics([NewTopic("cfg", 3, 3)], request_timeout=30).values()
    await asyncio.to_thread(future.result, 30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg", set_config={"retention.ms": "4321"})
    [future] = admin.alter_configs([resource]).values()
    await asyncio.to_thread(future.result, 30)

    async def described(port: int) -> str | None:
        client = await RawClient.connect(port)
        try:
            response = await client.request(DESCRIBE_CONFIGS, 4, {"resources": [{
                "resource_type": 2, "resource_name": "cfg", "configuration_keys": ["retention.ms"]}],
                "include_synonyms": False, "include_documentation": False})
        finally:
            await client.close()
        return next((c.value for c in response.results[0].configs), None)

    for i in cluster.ids:
        await until_async(lambda i=i: _equals(described(cluster.ports[i]), "4321"),
                          f"broker {i} to show retention.ms=4321", 30)
    zk = KazooClient(hosts=zk_connect)
    zk.start(10)
    try:
        bodies = [zk.get(f"/config/changes/{c}")[0] for c in zk.get_children("/config/changes")]
    finally:
        zk.stop()
        zk.close()
    assert b'"entity_path":"topics/cfg"' in b"".join(bodies)


async def _equals(answer, expected: str) -> bool:
    return await answer == expected
