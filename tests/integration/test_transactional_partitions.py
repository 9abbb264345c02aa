"""Transactional data on partitions: read_committed consumers against it: real clients (aiokafka, confluent-kafka)
see committed records only, stop at the last stable offset while a transaction is open, and
ListOffsets answers the LSO. Data goes in over TCP as a transactional producer writes it; the
markers are appended the way the transaction coordinator appends them (origin COORDINATOR)."""

from __future__ import annotations

import asyncio

import confluent_kafka
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from protocol.errors import ErrorCode
from protocol.records import encode_batch
from protocol.transaction_records import ControlType, marker_batch
from storage.append_origin import AppendOrigin
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import produce_body

PRODUCE, LIST_OFFSETS, FETCH, DESCRIBE_PRODUCERS = 0, 2, 1, 61
TOPIC = "tx-topic"
# These transactions have no coordinator: their leader is not to ask one (KIP-890 verification)
pytestmark = pytest.mark.broker_config({"transaction.partition.verification.enable": "false"})


def transactional(body: dict) -> dict:
    """A Produce body as a transactional producer sends it: with its transactional id."""
    return {**body, "transactional_id": "tx"}


async def create_topic(port: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, 1, 1)])
    finally:
        await admin.close()


async def produce(client: RawClient, batch: bytes) -> int:
    response = await client.request(PRODUCE, 9, transactional(
        produce_body({(TOPIC, 0): batch}, acks=-1)))
    [p] = response.responses[0].partition_responses
    assert p.error_code == ErrorCode.NONE, p
    return p.base_offset


def data(pid: int, seq: int, *values: bytes) -> bytes:
    return encode_batch([(None, v, [], None) for v in values], producer_id=pid, producer_epoch=0,
                        base_sequence=seq, is_transactional=True)


async def end(broker, pid: int, kind: ControlType) -> None:
    results = await broker.replica_manager.produce(
        -1, 5000, {(TOPIC, 0): marker_batch(pid, 0, kind, 0)}, origin=AppendOrigin.COORDINATOR)
    assert results[(TOPIC, 0)].error == ErrorCode.NONE


async def consume_all(port: int, isolation: str, expect: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", isolation_level=isolation,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        values: list[bytes] = []
        while len(values) < expect:
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=200), 10)
            values += [m.value for ms in batch.values() for m in ms]
        return values
    finally:
        await consumer.stop()


async def list_offset(client: RawClient, isolation: int) -> int:
    response = await client.request(LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                             "timestamp": -1}]}]})
    return response.topics[0].partitions[0].offset


async def test_read_committed_sees_committed_records_only(async_broker):
    port = async_broker.port
    await create_topic(port)
    client = await RawClient.connect(port)
    try:
        await produce(client, data(1, 0, b"c1", b"c2"))  # 0-1, committed below
        await produce(client, data(2, 0, b"a1"))  # 2, aborted below
        await end(async_broker, 1, ControlType.COMMIT)  # 3
        await end(async_broker, 2, ControlType.ABORT)  # 4
        await produce(client, encode_batch([(None, b"plain", [], None)]))  # 5
        await produce(client, data(1, 2, b"open"))  # 6: producer 1's next, still open
        assert await list_offset(client, 0) == 7  # read_uncommitted: the high watermark
        assert await list_offset(client, 1) == 6  # read_committed: the last stable offset
        [leader] = async_broker.replica_manager.partitions[(TOPIC, 0)].replica_states()
        assert leader["last_stable_offset"] == 6  # what `ctl partitions` shows

        assert await consume_all(port, "read_committed", 3) == [b"c1", b"c2", b"plain"]
        assert await consume_all(port, "read_uncommitted", 5) == \
            [b"c1", b"c2", b"a1", b"plain", b"open"]

        response = await client.request(FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}]})
        p = response.responses[0].partitions[0]
        assert (p.high_watermark, p.last_stable_offset) == (7, 6)
        assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions] == [(2, 2)]

        await end(async_broker, 1, ControlType.COMMIT)  # 7: the open one commits
        assert await list_offset(client, 1) == 8
        assert await consume_all(port, "read_committed", 4) == \
            [b"c1", b"c2", b"plain", b"open"]
    finally:
        await client.close()


async def test_clients_cannot_write_markers(async_broker):
    await create_topic(async_broker.port)
    client = await RawClient.connect(async_broker.port)
    try:
        response = await client.request(PRODUCE, 9, transactional(produce_body(
            {(TOPIC, 0): marker_batch(5, 0, ControlType.COMMIT, 0)}, acks=-1)))
        [p] = response.responses[0].partition_responses
        assert p.error_code == ErrorCode.INVALID_RECORD
        assert await list_offset(client, 0) == 0
    finally:
        await client.close()


def confluent_values(port: int, expect: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "rc",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:  # confluent-kafka's default isolation.level is read_committed
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        for _ in range(100):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) >= expect:
                break
        return values
    finally:
        consumer.close()


async def test_confluent_kafka_read_committed(async_broker):
    port = async_broker.port
    await create_topic(port)
    client = await RawClient.connect(port)
    try:
        await produce(client, data(1, 0, b"a1", b"a2"))
        await produce(client, data(2, 0, b"c1"))
        await end(async_broker, 1, ControlType.ABORT)
        await end(async_broker, 2, ControlType.COMMIT)
        await produce(client, encode_batch([(None, b"after", [], None)]))
    finally:
        await client.close()
    assert await asyncio.to_thread(confluent_values, port, 2) == [b"c1", b"after"]


async def test_describe_producers_shows_open_transactions(async_broker):
    await create_topic(async_broker.port)
    client = await RawClient.connect(async_broker.port)
    try:
        await produce(client, data(7, 0, b"x", b"y"))  # 0-1: producer 7 opens at 0
        await produce(client, encode_batch([(None, b"i", [], 123)], producer_id=8,
                                           producer_epoch=3, base_sequence=0))
        response = await client.request(DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": TOPIC, "partition_indexes": [0, 5]}, {"name": "nope", "partition_indexes": [0]}]})
        ours, missing = response.topics
        p0, p5 = ours.partitions
        assert p0.error_code == ErrorCode.NONE
        assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
                for p in p0.active_producers] == [(7, 0, 1, 0), (8, 3, 0, -1)]
        assert p0.active_producers[1].last_timestamp == 123
        assert p5.error_code == missing.partitions[0].error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        await client.close()
