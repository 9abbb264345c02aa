"""Disk faults on index files, over raw TCP on a 2-broker cluster: the partition leader's index
writes fail (ENOSPC, partway) at a segment roll; it answers KAFKA_STORAGE_ERROR, takes its log dir
offline and halts, while the other broker takes over and goes on serving its own partitions too.
Every acknowledged record is read back; restarted on a working disk, the broker recovers its logs
(indexes rebuilt) and catches up to a byte-identical copy."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import encode_batch, iter_batches
from storage.log_dir_failure_channel import KafkaStorageError
from storage.naming import CLEAN_SHUTDOWN_FILE
from tests.harness import cluster_config, led_here
from tests.integration.raw_client import RawClient
from tests.integration.test_fetch_purgatory import fetch_body
from tests.integration.test_hostile_input import create_topics, manual
from tests.integration.test_protocol_edges import FETCH, PRODUCE, produce_body


def record_batch(i: int) -> bytes:
    return encode_batch([(b"k%d" % i, b"v" * 200, [], int(time.time() * 1000))])


async def produce(client: RawClient, topic: str, i: int):
    response = await client.request(PRODUCE, 9, produce_body({(topic, 0): record_batch(i)}, acks=-1))
    return response.responses[0].partition_responses[0]


async def read_back(port: int, topic: str) -> list[int]:
    client = await RawClient.connect(port)
    try:
        stored: list[int] = []
        while True:
            response = await client.request(FETCH, 12, fetch_body(topic, len(stored), 0))
            partition = response.responses[0].partitions[0]
            assert partition.error_code == ErrorCode.NONE, partition
            got = [h.base_offset for _, h in iter_batches(partition.records)]
            if not got:
                return stored
            stored += got
    finally:
        await client.close()


def leader_is(broker, topic: str, leader: int):
    return lambda s: (p := s.partitions.get((topic, 0))) is not None and p.leader == leader


async def test_an_index_write_fault_halts_the_leader_and_the_cluster_goes_on(tmp_path: Path):
    cluster = Cluster(cluster_config(tmp_path / "data"), 2)
    await cluster.start()
    try:
        b0, b1 = cluster.brokers[0], cluster.brokers[1]
        await b0.metadata_cache.wait_for(lambda s: s.controller_id >= 0, 30_000)
        client = await RawClient.connect(b0.port)
        rolls = [{"name": "segment.bytes", "value": "700"}]  # a roll every few records
        assert await create_topics(client, [
            {"name": "x", "assignments": manual((0, [0, 1])), "configs": rolls},
            {"name": "y", "assignments": manual((0, [1])), "configs": rolls}]) == {
            "x": (ErrorCode.NONE, None), "y": (ErrorCode.NONE, None)}
        for broker in (b0, b1):
            await broker.metadata_cache.wait_for(leader_is(broker, "x", 0), 30_000)
        await client.close()
        producer = await RawClient.connect(b0.port)
        acked = [(await produce(producer, "x", i)).base_offset for i in range(3)]
        assert acked == [0, 1, 2]
        halted = asyncio.get_running_loop().create_future()
        cluster.context.on_broker_halt = halted.set_result

        fault = cluster.add_disk_fault(0, "write", "ENOSPC", files=["index"], after_bytes=10)
        assert fault["files"] == ["index"]
        failed = None
        for i in range(3, 30):  # the next roll writes the old segment's index: 10 bytes, torn
            answer = await produce(producer, "x", i)
            if answer.error_code != ErrorCode.NONE:
                failed = answer
                break
            acked.append(answer.base_offset)
        assert failed is not None and failed.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "No space left on device" in failed.error_message
        assert await asyncio.wait_for(halted, 10) == 0
        await producer.close()
        assert not b0.running and b1.running
        assert not (tmp_path / "data" / "broker-0" / CLEAN_SHUTDOWN_FILE).exists()

        # Broker 1 leads x now, with every acknowledged record, and serves y as before.
        await b1.metadata_cache.wait_for(leader_is(b1, "x", 1), 30_000)
        assert await read_back(b1.port, "x") == acked
        other = await RawClient.connect(b1.port)
        assert (await produce(other, "y", 0)).error_code == ErrorCode.NONE
        assert (await produce(other, "x", 99)).base_offset == len(acked)
        await other.close()

        assert cluster.clear_disk_faults(broker_id=0) == 1
        await cluster.start_broker(0)
        b0 = cluster.brokers[0]
        log0 = b0.log_manager.get_log("x", 0)
        assert all(s.offset_index.well_formed() and s.offset_index.sane(s.size)
                   for s in log0.segments)  # the torn index was rebuilt at load
        log1 = b1.log_manager.get_log("x", 0)
        deadline = time.monotonic() + 30
        while log0.log_end_offset < log1.log_end_offset:  # b0 follows b1 on real time
            assert time.monotonic() < deadline, (log0.log_end_offset, log1.log_end_offset)
            await asyncio.sleep(0.02)  # fetches on real time: look again shortly
        assert b"".join(log0.chunks(1 << 20)) == b"".join(log1.chunks(1 << 20))
        assert len(log0.segments) > 2
    finally:
        await cluster.stop()


async def test_a_cleaner_output_fault_halts_the_broker_and_the_other_takes_over(tmp_path: Path):
    """The broker's cleaner pass runs in a worker thread: the failed write of its `.cleaned` file
    comes back to the loop and takes the dir offline (Kafka's cleaner thread on an IOException)."""
    # No timed passes: the test runs the broker's own pass once the records are acknowledged.
    cluster = Cluster(cluster_config(tmp_path / "data", {"log.cleaner.enable": "false"}), 2)
    await cluster.start()
    try:
        b0, b1 = cluster.brokers[0], cluster.brokers[1]
        await b0.metadata_cache.wait_for(lambda s: s.controller_id >= 0, 30_000)
        client = await RawClient.connect(b0.port)
        configs = [{"name": "segment.bytes", "value": "700"},
                   {"name": "cleanup.policy", "value": "compact"}]
        assert await create_topics(client, [
            {"name": "c", "assignments": manual((0, [0, 1])), "configs": configs}]) == {
            "c": (ErrorCode.NONE, None)}
        for broker in (b0, b1):
            await broker.metadata_cache.wait_for(leader_is(broker, "c", 0), 30_000)
        acked = [(await produce(client, "c", 0)).base_offset for _ in range(12)]  # one key
        assert acked == list(range(12))
        await client.close()
        halted = asyncio.get_running_loop().create_future()
        cluster.context.on_broker_halt = halted.set_result
        cluster.add_disk_fault(0, "write", "EIO", files=["cleaner"])
        assert await b0._clean_logs() == 0  # the pass, as the broker's timer would run it
        assert await asyncio.wait_for(halted, 10) == 0
        assert [f["hits"] for f in cluster.disk_faults()] == [1]
        assert not list((tmp_path / "data" / "broker-0" / "c-0").glob("*.cleaned"))
        with pytest.raises(KafkaStorageError, match="is offline"):  # the partition's answer
            b0.log_manager.failure_channel.check_online(str(b0.config.data_dir), "appending")
        # (its metadata may name it leader before its LeaderAndIsr, written durably, comes)
        await led_here(b1, "c")
        assert b1.running and await read_back(b1.port, "c") == acked  # b1 has not cleaned yet
    finally:
        await cluster.stop()
