"""Followers fetch through fetch sessions (KIP-227) in an embedded 3-broker cluster on the manual
clock: each (follower, leader) pair holds one privileged session, idle partitions are named in no
request once the session is open, and a high watermark that moved alone still reaches followers."""

from __future__ import annotations

import asyncio

import pytest

from broker.server.cluster import Cluster
from protocol.records import encode_batch, iter_batches
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import CREATE_TOPICS, FETCH, PRODUCE, produce_body
from timer import ManualClock

PARTITIONS = 30


@pytest.fixture
async def cluster(tmp_path):
    cluster = Cluster(cluster_config(tmp_path), 3, clock=ManualClock(1_000_000))
    await cluster.start()
    for broker in cluster.brokers.values():
        await broker.metadata_cache.wait_for(lambda s: len(s.brokers) == 3, 10_000)
    yield cluster
    await cluster.stop()


def replicas(cluster: Cluster, key: tuple[str, int]):
    return [b.replica_manager.partitions[key] for b in cluster.brokers.values()]


async def produce(cluster: Cluster, partition: int) -> None:
    leader = cluster.brokers[cluster.active_controller().states[("fol", partition)].leader]
    client = await RawClient.connect(leader.port)
    response = await client.request(PRODUCE, 9, produce_body(
        {("fol", partition): encode_batch([(None, b"x", [], 1)])}, acks=-1))
    assert response.responses[0].partition_responses[0].error_code == 0
    await client.close()


async def test_followers_fetch_only_what_changed(cluster):
    client = await RawClient.connect(cluster.brokers[0].port)
    response = await client.request(CREATE_TOPICS, 7, {"topics": [{
        "name": "fol", "num_partitions": PARTITIONS, "replication_factor": 3, "configs": []}],
        "timeout_ms": 10_000})
    assert response.topics[0].error_code == 0, response
    await client.close()
    keys = [("fol", p) for p in range(PARTITIONS)]
    await until(lambda: all(len(b.replica_manager.partitions) == PARTITIONS
                            for b in cluster.brokers.values()))
    for p in range(PARTITIONS):
        await produce(cluster, p)  # acks=-1: answered once both followers have it
    # Followers learn the high watermark from an incremental answer that carries only it; their
    # parked fetches return when the max wait passes on the manual clock.
    cluster.clock.advance(600)
    await until(lambda: all(r.high_watermark == 1 for k in keys for r in replicas(cluster, k)))

    named: list[tuple[str, int]] = []
    for broker in cluster.brokers.values():
        led = sum(1 for k in keys if broker.replica_manager.partitions[k].is_leader)
        stats = broker.replica_manager.fetch_manager.stats()
        # One session per follower broker, each holding every partition this broker leads.
        assert (stats["sessions"], stats["privileged"], stats["partitions"]) == (2, 2, 2 * led)
        manager = broker.replica_manager.fetch_manager
        original = manager.new_context

        def recording(metadata, partitions, forgotten, *, original=original, **options):
            context = original(metadata, partitions, forgotten, **options)
            named.append((context.kind, len(partitions)))
            return context

        manager.new_context = recording
    remade: list[list[tuple[str, int]]] = []  # per follower round, the requests it remade
    for broker in cluster.brokers.values():
        for fetcher in broker.replica_manager.fetchers.values():
            def remaking(now, *, original=fetcher._remake_stale_requests):
                remade.append(original(now))
                return remade[-1]

            fetcher._remake_stale_requests = remaking

    await produce(cluster, 7)
    cluster.clock.advance(600)
    await until(lambda: all(r.high_watermark == 2 for r in replicas(cluster, ("fol", 7))))
    assert named and all(kind == "incremental" for kind, _ in named)
    # Only partition 7 moved: no request named more than it, whatever the partition count,
    # and no follower round remade another partition's request.
    assert max(n for _, n in named) == 1
    assert remade and {key for keys in remade for key in keys} == {("fol", 7)}


async def test_acks_all_and_a_parked_session_fetch_complete_without_the_clock(cluster):
    """The wake-up chain of an acks=-1 produce needs no timer: the append wakes the followers'
    parked fetches, their next fetches raise the high watermark, which answers the produce and
    the consumer's parked incremental fetch. The manual clock never moves here, so a step that
    waited for an expiry instead of a wake-up would hang the test."""
    client = await RawClient.connect(cluster.brokers[0].port)
    response = await client.request(CREATE_TOPICS, 7, {"topics": [{
        "name": "fol", "num_partitions": 3, "replication_factor": 3, "configs": []}],
        "timeout_ms": 10_000})
    assert response.topics[0].error_code == 0, response
    await client.close()
    await until(lambda: all(len(b.replica_manager.partitions) == 3
                            for b in cluster.brokers.values()))
    leader = cluster.brokers[cluster.active_controller().states[("fol", 1)].leader]
    consumer = await RawClient.connect(leader.port)
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
            "session_id": 0, "session_epoch": 0, "forgotten_topics_data": [],
            "topics": [{"topic": "fol", "partitions": [
                {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    full = await consumer.request(FETCH, 12, {**body, "min_bytes": 0, "max_wait_ms": 0})
    for round_ in range(3):
        parked = asyncio.create_task(consumer.request(FETCH, 12, {
            **body, "session_id": full.session_id, "session_epoch": round_ + 1,
            "topics": [] if round_ == 0 else [{"topic": "fol", "partitions": [
                {"partition": 1, "fetch_offset": round_, "partition_max_bytes": 1 << 20}]}]}))
        await until(lambda: leader.replica_manager.fetch_purgatory.delayed >= 3)
        await asyncio.wait_for(produce(cluster, 1), 10)  # acks=-1
        answer = await asyncio.wait_for(parked, 10)
        (part,) = answer.responses[0].partitions
        assert (part.partition_index, part.high_watermark) == (1, round_ + 1)
        assert [h.base_offset for _, h in iter_batches(part.records)] == [round_]
    await consumer.close()
