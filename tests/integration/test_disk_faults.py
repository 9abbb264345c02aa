"""A failing disk under one broker, over raw TCP: the produce whose write fails partway is answered
KAFKA_STORAGE_ERROR, a fetch parked on the partition answers at once with the same error, the
broker halts without writing its clean-shutdown marker, and started again it serves everything it
had acknowledged, with new appends going on at the right offsets; while its disk still fails it
does not start."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import encode_batch, iter_batches
from storage.naming import CLEAN_SHUTDOWN_FILE
from tests.harness import cluster_config, led_here, until
from tests.integration.raw_client import RawClient
from tests.integration.test_fetch_purgatory import fetch_body
from tests.integration.test_protocol_edges import FETCH, PRODUCE, create_topic, produce_body


def one_batch(i: int) -> bytes:
    return encode_batch([(b"k%d" % i, b"v" * 50, [], 1_000 + i)])


async def produce(client: RawClient, i: int):
    response = await client.request(PRODUCE, 9, produce_body({("d", 0): one_batch(i)}))
    return response.responses[0].partition_responses[0]


async def test_a_failed_write_answers_kafka_storage_error_and_halts_the_broker(tmp_path: Path):
    cluster = Cluster(cluster_config(tmp_path / "data"), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
        producer = await RawClient.connect(broker.port)
        consumer = await RawClient.connect(broker.port)
        await create_topic(producer, "d")
        assert [(await produce(producer, i)).base_offset for i in range(2)] == [0, 1]
        segment = tmp_path / "data" / "broker-0" / "d-0" / f"{0:020d}.log"
        size = os.path.getsize(segment)
        parked = await consumer.send(FETCH, 12, fetch_body("d", 2, 3_600_000))
        await until(lambda: broker.replica_manager.fetch_purgatory.delayed == 1)
        halted = asyncio.get_running_loop().create_future()
        cluster.context.on_broker_halt = halted.set_result

        cluster.add_disk_fault(0, "write", "ENOSPC", after_bytes=20)
        failed = await produce(producer, 2)
        assert failed.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "No space left on device" in failed.error_message
        fetched = await asyncio.wait_for(consumer.receive(FETCH, 12, parked), 5)
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert await asyncio.wait_for(halted, 10) == 0
        assert not broker.running and (await cluster.brokers_info())[0]["alive"] is False
        assert os.path.getsize(segment) == size  # the 20 bytes written were cut off again
        assert not (tmp_path / "data" / "broker-0" / CLEAN_SHUTDOWN_FILE).exists()
        await producer.close()
        await consumer.close()

        assert cluster.clear_disk_faults(broker_id=0) == 1
        await cluster.start_broker(0)
        broker = cluster.brokers[0]
        await led_here(broker, "d")
        client = await RawClient.connect(broker.port)
        assert (await produce(client, 3)).base_offset == 2
        stored = []
        while len(stored) < 3:  # a fetch answers from one segment (a restart may have rolled)
            response = await client.request(FETCH, 12, fetch_body("d", len(stored), 0))
            got = [h.base_offset for _, h in iter_batches(response.responses[0].partitions[0].records)]
            assert got, stored
            stored += got
        assert stored == [0, 1, 2]
        await client.close()
    finally:
        await cluster.stop()


async def test_a_broker_whose_disk_still_fails_does_not_start(tmp_path: Path):
    """EIO leaves the torn bytes on disk; recovery cuts them at the next start and fsyncs the cut,
    which a disk still failing fsyncs refuses: the broker does not start, and says why."""
    cluster = Cluster(cluster_config(tmp_path / "data"), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
        client = await RawClient.connect(broker.port)
        await create_topic(client, "d")
        assert (await produce(client, 0)).base_offset == 0
        segment = tmp_path / "data" / "broker-0" / "d-0" / f"{0:020d}.log"
        size = os.path.getsize(segment)
        halted = asyncio.get_running_loop().create_future()
        cluster.context.on_broker_halt = halted.set_result
        cluster.add_disk_fault(0, "write", "EIO", after_bytes=20)
        assert (await produce(client, 1)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        await asyncio.wait_for(halted, 10)
        await client.close()
        assert os.path.getsize(segment) == size + 20  # EIO refused the truncation back too

        cluster.add_disk_fault(0, "fsync", "EIO")
        with pytest.raises(ValueError, match="broker 0 cannot start: Error while flushing log d-0"):
            await cluster.start_broker(0)
        assert not cluster.brokers[0].running
        assert cluster.clear_disk_faults(broker_id=0) == 2
        await cluster.start_broker(0)
        assert os.path.getsize(segment) == size  # recovery cut the torn tail
        broker = cluster.brokers[0]
        await led_here(broker, "d")
        client = await RawClient.connect(broker.port)
        assert (await produce(client, 2)).base_offset == 1
        await client.close()
    finally:
        await cluster.stop()
