"""DelayedFetch over TCP: a fetch on an empty partition parks in the purgatory, wakes on data,
and answers empty at max wait — the latter on the manual clock, so no test waits for real time."""

from __future__ import annotations

import asyncio
import time

from broker.replication import purgatory_view
from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import encode_batch, iter_batches
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import FETCH, PRODUCE, create_topic, produce_body
from timer import ManualClock


def fetch_body(topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}


async def test_parked_fetch_wakes_on_produce(async_broker):
    consumer = await RawClient.connect(async_broker.port)
    producer = await RawClient.connect(async_broker.port)
    await create_topic(producer, "wake")
    purgatory = async_broker.replica_manager.fetch_purgatory
    # max wait of an hour: only an append can answer this fetch within the test's timeout.
    correlation_id = await consumer.send(FETCH, 12, fetch_body("wake", 0, 3_600_000))
    await until(lambda: purgatory.delayed == 1)
    assert purgatory_view.watched(purgatory, ("wake", 0)) == 1

    await producer.request(PRODUCE, 9, produce_body({("wake", 0): encode_batch([(b"k", b"v", [], 5)])}))
    produced_at = time.perf_counter()
    response = await asyncio.wait_for(consumer.receive(FETCH, 12, correlation_id), 10)
    wake_ms = (time.perf_counter() - produced_at) * 1000
    partition = response.responses[0].partitions[0]
    assert partition.error_code == 0
    assert partition.high_watermark == 1
    assert [h.base_offset for _, h in iter_batches(partition.records)] == [0]
    assert purgatory.delayed == 0
    assert purgatory.completed_count == 1
    print(f"fetch answered {wake_ms:.2f} ms after the produce response")
    await consumer.close()
    await producer.close()


async def test_fetch_below_min_bytes_keeps_waiting(async_broker):
    consumer = await RawClient.connect(async_broker.port)
    producer = await RawClient.connect(async_broker.port)
    await create_topic(producer, "minbytes")
    purgatory = async_broker.replica_manager.fetch_purgatory
    correlation_id = await consumer.send(FETCH, 12, fetch_body("minbytes", 0, 3_600_000, 300))
    await until(lambda: purgatory.delayed == 1)
    small = encode_batch([(None, b"x" * 10, [], 1)])
    await producer.request(PRODUCE, 9, produce_body({("minbytes", 0): small}))
    assert purgatory.delayed == 1  # 80-odd bytes are not 300
    await producer.request(PRODUCE, 9, produce_body({("minbytes", 0): encode_batch(
        [(None, b"y" * 400, [], 2)])}))
    response = await asyncio.wait_for(consumer.receive(FETCH, 12, correlation_id), 10)
    records = response.responses[0].partitions[0].records
    assert [h.base_offset for _, h in iter_batches(records)] == [0, 1]
    await consumer.close()
    await producer.close()


async def test_fetch_answers_empty_at_max_wait_on_the_manual_clock(tmp_path):
    clock = ManualClock(1_000)
    cluster = Cluster(cluster_config(tmp_path), 1, clock=clock)
    await cluster.start()
    broker = cluster.brokers[0]
    await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
    try:
        client = await RawClient.connect(broker.port)
        await create_topic(client, "idle")
        purgatory = broker.replica_manager.fetch_purgatory
        correlation_id = await client.send(FETCH, 12, fetch_body("idle", 0, 500))
        await until(lambda: purgatory.delayed == 1)
        reply = asyncio.ensure_future(client.receive(FETCH, 12, correlation_id))
        clock.advance(499)
        for _ in range(200):  # give the reaper every chance to fire early
            await asyncio.sleep(0)
        assert not reply.done()
        assert (purgatory.expired_count, purgatory.delayed) == (0, 1)
        clock.advance(1)
        response = await asyncio.wait_for(reply, 10)
        partition = response.responses[0].partitions[0]
        assert (partition.error_code, partition.high_watermark, partition.records) == (0, 0, b"")
        assert purgatory.expired_count == 1
        await client.close()
    finally:
        await cluster.stop()


def listing(partition: int, offset: int) -> dict:
    return {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}


async def test_a_partition_listed_many_times_is_read_answered_and_watched_once(async_broker):
    consumer = await RawClient.connect(async_broker.port)
    producer = await RawClient.connect(async_broker.port)
    await create_topic(producer, "dup", partitions=2)
    for i in range(2):
        await producer.request(PRODUCE, 9, produce_body({("dup", 0): encode_batch(
            [(None, b"v", [], i)])}))

    # As Kafka's LinkedHashMap: each partition once, at its first place, the last listing winning.
    response = await consumer.request(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "topics": [{"topic": "dup", "partitions": [listing(0, 0)] * 3000},
                   {"topic": "dup", "partitions": [listing(1, 0), listing(0, 1)]}]})
    assert [t.topic for t in response.responses] == ["dup"]
    answered = response.responses[0].partitions
    assert [p.partition_index for p in answered] == [0, 1]
    assert [h.base_offset for _, h in iter_batches(answered[0].records)] == [1]

    # Parked, it watches and re-checks two partitions, not 3001.
    purgatory = async_broker.replica_manager.fetch_purgatory
    correlation_id = await consumer.send(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 3_600_000, "min_bytes": 1, "max_bytes": 1 << 20,
        "topics": [{"topic": "dup", "partitions": [listing(0, 2)] * 3000 + [listing(1, 0)]}]})
    await until(lambda: purgatory.delayed == 1)
    (parked,) = async_broker.replica_manager._parked
    assert len(parked.partitions) == 2
    assert purgatory_view.watched(purgatory, ("dup", 0)) == purgatory_view.watched(purgatory, ("dup", 1)) == 1
    await producer.request(PRODUCE, 9, produce_body({("dup", 0): encode_batch([(None, b"w", [], 3)])}))
    response = await asyncio.wait_for(consumer.receive(FETCH, 12, correlation_id), 10)
    answered = response.responses[0].partitions
    assert [p.partition_index for p in answered] == [0, 1]
    assert [h.base_offset for _, h in iter_batches(answered[0].records)] == [2]
    await consumer.close()
    await producer.close()


async def test_a_parked_fetch_whose_read_fails_is_answered_and_the_produce_is_not_hurt(
        async_broker, monkeypatch):
    from storage.log import Log

    consumer = await RawClient.connect(async_broker.port)
    producer = await RawClient.connect(async_broker.port)
    await create_topic(producer, "broken")
    await create_topic(producer, "fine")
    purgatory = async_broker.replica_manager.fetch_purgatory
    correlation_id = await consumer.send(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 3_600_000, "min_bytes": 1, "max_bytes": 1 << 20,
        "topics": [{"topic": "broken", "partitions": [listing(0, 0)]},
                   {"topic": "fine", "partitions": [listing(0, 0)]}]})
    await until(lambda: purgatory.delayed == 1)

    original = Log.read

    def read(self, *args, **kwargs):
        if self.directory.name.startswith("broken-"):
            raise RuntimeError("injected: an unreadable segment")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Log, "read", read)
    response = await producer.request(PRODUCE, 9, produce_body({  # "fine" first: it wakes the fetch
        ("fine", 0): encode_batch([(None, b"y", [], 1)]),
        ("broken", 0): encode_batch([(None, b"x", [], 1)])}))
    assert [p.error_code for t in response.responses for p in t.partition_responses] == [0, 0]
    response = await asyncio.wait_for(consumer.receive(FETCH, 12, correlation_id), 10)
    answered = {t.topic: t.partitions[0] for t in response.responses}
    assert answered["broken"].error_code == ErrorCode.UNKNOWN_SERVER_ERROR  # that partition only
    assert [h.base_offset for _, h in iter_batches(answered["fine"].records)] == [0]
    assert purgatory.delayed == 0

    # A completion that fails outside the per-partition read is answered all the same.
    rm = async_broker.replica_manager
    correlation_id = await consumer.send(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 3_600_000, "min_bytes": 1, "max_bytes": 1 << 20,
        "topics": [{"topic": "fine", "partitions": [listing(0, 1)]}]})
    await until(lambda: purgatory.delayed == 1)
    (parked,) = rm._parked

    def broken_read(_params, _partitions):
        raise RuntimeError("injected: a bug in the read")

    parked._read = broken_read
    response = await producer.request(PRODUCE, 9, produce_body({
        ("fine", 0): encode_batch([(None, b"z", [], 2)])}))
    assert response.responses[0].partition_responses[0].error_code == 0
    response = await asyncio.wait_for(consumer.receive(FETCH, 12, correlation_id), 10)
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    await consumer.close()
    await producer.close()
