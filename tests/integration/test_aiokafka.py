"""aiokafka against a real broker over TCP: admin, every codec, limits, restart."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import MessageSizeTooLargeError

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


async def consume_all(bootstrap: str, topic: str, partition: int, count: int) -> list:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, partition)])
        records = []
        while len(records) < count:
            batch = await consumer.getmany(timeout_ms=10_000)
            assert batch, f"no records after {len(records)}"
            for msgs in batch.values():
                records.extend(msgs)
        return records
    finally:
        await consumer.stop()


async def test_admin_create_describe_delete(kafka_broker):
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic("ak-admin", 4, 1, topic_configs={"max.message.bytes": "500000"})]
        )
        assert [t[1] for t in response.topic_errors] == [0]
        assert "ak-admin" in await admin.list_topics()
        [described] = await admin.describe_topics(["ak-admin"])
        assert len(described["partitions"]) == 4
        [result] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "ak-admin")])
        configs = {c[0]: c[1] for c in result.resources[0][4]}
        assert configs["max.message.bytes"] == "500000"
        again = await admin.create_topics([NewTopic("ak-admin", 1, 1)])
        assert [t[1] for t in again.topic_errors] == [36]  # TOPIC_ALREADY_EXISTS
        deleted = await admin.delete_topics(["ak-admin"])
        assert [t[1] for t in deleted.topic_error_codes] == [0]
        assert "ak-admin" not in await admin.list_topics()
    finally:
        await admin.close()


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_consume_every_codec(kafka_broker, codec):
    topic = f"ak-{codec or 'none'}"
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, compression_type=codec,
                                linger_ms=20)
    await producer.start()
    items = [(f"k{i}".encode(), f"v{i}".encode() * 25, [("n", str(i).encode())]) for i in range(150)]
    try:
        futures = [await producer.send(topic, key=k, value=v, headers=h) for k, v, h in items]
        offsets = [(await f).offset for f in futures]
    finally:
        await producer.stop()
    assert offsets == list(range(150))
    records = await consume_all(kafka_broker.bootstrap, topic, 0, 150)
    assert [r.offset for r in records] == list(range(150))
    assert [(r.key, r.value, list(r.headers)) for r in records] == [(k, v, h) for k, v, h in items]


async def test_large_message_and_over_limit(kafka_broker):
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap,
                                max_request_size=4_000_000, max_batch_size=4_000_000)
    await producer.start()
    try:
        big = b"z" * 900_000
        assert (await producer.send_and_wait("ak-big", big)).offset == 0
        with pytest.raises(MessageSizeTooLargeError):
            await producer.send_and_wait("ak-big", b"q" * 1_200_000)
    finally:
        await producer.stop()
    [record] = await consume_all(kafka_broker.bootstrap, "ak-big", 0, 1)
    assert record.value == big


async def test_restart_keeps_everything(kafka_broker):
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait("ak-durable", b"v%d" % i, key=b"k%d" % i)
    finally:
        await producer.stop()
    await asyncio.get_running_loop().run_in_executor(None, kafka_broker.restart)
    records = await consume_all(kafka_broker.bootstrap, "ak-durable", 0, 20)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(20)]
