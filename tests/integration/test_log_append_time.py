"""Topics with message.timestamp.type=LogAppendTime: the leader stamps each batch with the append
time and the LogAppendTime attribute, followers keep the leader's bytes, consumers read the append
time as a log-append timestamp, and Produce answers log_append_time_ms (-1 for CreateTime)."""

from __future__ import annotations

import time

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from protocol.errors import ErrorCode
from protocol.records import LOG_APPEND_TIME, decode_batch, encode_batch, iter_batches
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic
from tests.integration.test_protocol_edges import PRODUCE, produce_body

AN_HOUR_AGO = int(time.time() * 1000) - 3_600_000


async def test_produce_answers_the_append_time(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    await create_topic(client, "ct")
    before = int(time.time() * 1000)
    batch = encode_batch([(None, b"a", [], AN_HOUR_AGO), (None, b"b", [], AN_HOUR_AGO + 5)])
    response = await client.request(PRODUCE, 9, produce_body({("lat", 0): batch, ("ct", 0): batch}))
    answers = {t.name: t.partition_responses[0] for t in response.responses}
    assert answers["lat"].error_code == answers["ct"].error_code == ErrorCode.NONE
    assert before <= answers["lat"].log_append_time_ms <= int(time.time() * 1000)
    assert answers["ct"].log_append_time_ms == -1
    stored = async_broker.log_manager.get_log("lat", 0).read(0, 1 << 20).records
    [(pos, header)] = list(iter_batches(stored))
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.max_timestamp == answers["lat"].log_append_time_ms
    assert [r.timestamp for r in decode_batch(stored, pos)[1]] == [header.max_timestamp] * 2
    await client.close()


def test_clients_read_the_append_time_on_every_replica(broker_factory):
    broker = broker_factory(brokers=3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("lat3", 1, 3, config={
        "message.timestamp.type": "LogAppendTime"})])["lat3"].result(10)

    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    producer.produce("lat3", b"ck", timestamp=AN_HOUR_AGO,
                     on_delivery=lambda err, msg: reports.append((err, msg.timestamp())))
    assert producer.flush(10) == 0
    [(err, (kind, appended))] = reports
    assert err is None and kind == TIMESTAMP_LOG_APPEND_TIME and appended > AN_HOUR_AGO
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    metadata = kp.send("lat3", b"kp", timestamp_ms=AN_HOUR_AGO).get(10)
    kp.close()
    assert metadata.timestamp > AN_HOUR_AGO  # the broker's log_append_time_ms

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lat-ck",
                         "auto.offset.reset": "earliest"})
    consumer.assign([CkTopicPartition("lat3", 0, 0)])
    seen = []
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.append(msg.timestamp())
    consumer.close()
    assert seen[0] == (TIMESTAMP_LOG_APPEND_TIME, appended)
    assert seen[1] == (TIMESTAMP_LOG_APPEND_TIME, metadata.timestamp)

    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                       consumer_timeout_ms=5000)
    kc.assign([TopicPartition("lat3", 0)])
    records = [next(kc), next(kc)]
    kc.close()
    assert [(r.timestamp_type, r.timestamp) for r in records] == [(1, appended), (1, metadata.timestamp)]

    # Followers hold the leader's bytes: the same stamped batches on every replica.
    def stored(b):
        return b.log_manager.get_log("lat3", 0).read(0, 1 << 20).records

    deadline = time.monotonic() + 10
    while True:
        copies = broker.call(lambda: [stored(b) for b in broker.cluster.brokers.values()])
        if len(set(copies)) == 1 and copies[0] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(set(copies)) == 1
    assert [h.timestamp_type for _, h in iter_batches(copies[0])] == [LOG_APPEND_TIME] * 2
