"""Clients of message formats v0/v1 over a real listener, as Kafka 3.9 serves them: Produce v0-2
message sets converted to magic-2 batches on append (kafka-python with api_version (0, 9) and
(0, 10), librdkafka with broker.version.fallback=0.9.0.0 as its test 0052 runs it), read by a
modern consumer; old consumers (Fetch v0-3, ListOffsets v0) given down-converted message sets.
A message set that cannot be read fails its partition only."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import UnsupportedVersionError

from protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import create_topic, produce_body
from tests.unit.protocol.test_legacy_records import message

PRODUCE = 0
CREATE_TIME, LOG_APPEND_TIME = 1, 2  # confluent-kafka's timestamp types


def read_all(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < count:
        assert time.monotonic() < deadline, got
        m = consumer.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m)
    consumer.close()
    return got


def test_old_producers_are_converted_on_append(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, kind in (("old-create", "CreateTime"), ("old-append", "LogAppendTime")):
        admin.create_topics([NewTopic(name, 1, 1, config={"message.timestamp.type": kind})])[
            name].result(10)
    before = int(time.time() * 1000)
    for version in ((0, 9), (0, 10)):
        for codec in (None, "gzip"):
            producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=version,
                                     compression_type=codec)
            for topic in ("old-create", "old-append"):
                producer.send(topic, key=b"k", value=f"{version}-{codec}".encode(),
                              timestamp_ms=before if version == (0, 10) else None).get(10)
            producer.close()
    # librdkafka as its test 0052 runs it against a 3.9 broker: no ApiVersions, Produce v1
    producer = Producer({"bootstrap.servers": bootstrap, "api.version.request": False,
                         "broker.version.fallback": "0.9.0.0", "enable.idempotence": False})
    for topic in ("old-create", "old-append"):
        producer.produce(topic, b"librdkafka")
    assert producer.flush(10) == 0
    created = read_all(bootstrap, "old-create", 5)
    assert [(m.value(), m.timestamp()) for m in created] == [
        (b"(0, 9)-None", (CREATE_TIME, -1)), (b"(0, 9)-gzip", (CREATE_TIME, -1)),
        (b"(0, 10)-None", (CREATE_TIME, before)), (b"(0, 10)-gzip", (CREATE_TIME, before)),
        (b"librdkafka", (CREATE_TIME, -1))]  # magic 0 has no timestamp
    appended = read_all(bootstrap, "old-append", 5)
    assert {m.timestamp()[0] for m in appended} == {LOG_APPEND_TIME}
    assert all(m.timestamp()[1] >= before for m in appended)


def test_old_consumers_are_given_down_converted_message_sets(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "old-readers"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("old-read", key=b"k%d" % i, value=b"v%d" % i, timestamp=1_000 + i)
    producer.commit_transaction(30)  # a marker at offset 3: not a message of the old formats
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("old-read", value=b"after", timestamp=2_000)
    assert plain.flush(10) == 0
    for version, stamps in (((0, 9), [None] * 4), ((0, 10), [1_000, 1_001, 1_002, 2_000])):
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=version,
                                 auto_offset_reset="earliest", consumer_timeout_ms=3000)
        consumer.assign([KpTopicPartition("old-read", 0)])
        got = [(m.offset, m.key, m.value, m.timestamp) for m in consumer]
        consumer.close()
        assert got == [(0, b"k0", b"v0", stamps[0]), (1, b"k1", b"v1", stamps[1]),
                       (2, b"k2", b"v2", stamps[2]), (4, None, b"after", stamps[3])], version


async def test_an_unreadable_message_set_fails_its_partition_only(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "old-bad", 2)
    good = message(1, None, b"fine") + message(1, None, b"too", offset=1)
    bad = message(1, None, b"broken", crc_delta=1)
    answer = await client.request(PRODUCE, 2, produce_body(
        {("old-bad", 0): good, ("old-bad", 1): bad}))
    results = {p.index: (p.error_code, p.base_offset)
               for t in answer.responses for p in t.partition_responses}
    assert results == {0: (0, 0), 1: (ErrorCode.CORRUPT_MESSAGE, -1)}
    again = await client.request(PRODUCE, 1, produce_body({("old-bad", 0): good}))
    assert again.responses[0].partition_responses[0].base_offset == 2
    await client.close()


def test_a_topic_refusing_down_conversion_answers_old_consumers_unsupported_version(
        kafka_broker):
    bootstrap = kafka_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("no-down", 1, 1, config={
        "message.downconversion.enable": "false"})])["no-down"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("no-down", b"v2 only")
    assert producer.flush(10) == 0
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=(0, 10),
                             auto_offset_reset="earliest", consumer_timeout_ms=2000)
    consumer.assign([KpTopicPartition("no-down", 0)])
    with pytest.raises(UnsupportedVersionError):  # the partition's error, as Kafka answers
        list(consumer)
    consumer.close()
    assert [m.value() for m in read_all(bootstrap, "no-down", 1)] == [b"v2 only"]
