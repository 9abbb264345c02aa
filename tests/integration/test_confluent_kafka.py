"""confluent-kafka (librdkafka) against a real broker over TCP: admin, every codec, limits."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def consume_all(bootstrap: str, topic: str, partition: int, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, partition, 0)])
    records = []
    for _ in range(100):
        for msg in consumer.consume(count - len(records), timeout=0.5):
            assert msg.error() is None, msg.error()
            records.append(msg)
        if len(records) >= count:
            break
    consumer.close()
    return records


def produce(bootstrap: str, topic: str, items, **conf) -> list:
    producer = Producer({"bootstrap.servers": bootstrap, **conf})
    reports = []
    for key, value, headers in items:
        producer.produce(topic, key=key, value=value, headers=headers,
                         on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(30) == 0
    return reports


def test_admin_create_describe_delete(kafka_broker):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    futures = admin.create_topics([NewTopic("ck-admin", 2, 1, config={"cleanup.policy": "delete",
                                                                      "retention.ms": "86400000"})])
    futures["ck-admin"].result(10)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["ck-admin"].partitions) == 2
    [described] = admin.describe_configs([ConfigResource("topic", "ck-admin")]).values()
    configs = described.result(10)
    assert configs["retention.ms"].value == "86400000"
    assert not configs["retention.ms"].is_default
    assert configs["segment.bytes"].is_default
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic("ck-admin", 1, 1)])["ck-admin"].result(10)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"].result(10)
    assert exc.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    admin.create_partitions([NewPartitions("ck-admin", 3)])["ck-admin"].result(10)
    assert len(admin.list_topics(timeout=10).topics["ck-admin"].partitions) == 3
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    producer.produce("ck-admin", b"in the new partition", partition=2)
    assert producer.flush(10) == 0
    admin.delete_topics(["ck-admin"])["ck-admin"].result(10)
    assert "ck-admin" not in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(kafka_broker, codec):
    topic = f"ck-{codec}"
    items = [(f"k{i}".encode(), f"v{i}".encode() * 30, [("idx", str(i).encode())]) for i in range(300)]
    reports = produce(kafka_broker.bootstrap, topic, items, **{"compression.type": codec,
                                                               "linger.ms": 20})
    assert all(err is None for err, _ in reports)
    assert sorted(msg.offset() for _, msg in reports) == list(range(300))
    records = consume_all(kafka_broker.bootstrap, topic, 0, 300)
    assert [m.offset() for m in records] == list(range(300))
    assert [(m.key(), m.value(), m.headers()) for m in records] == [
        (k, v, h) for k, v, h in items
    ]


def test_idempotent_producer_gets_a_producer_id(kafka_broker):
    reports = produce(kafka_broker.bootstrap, "ck-idem", [(None, b"x%d" % i, None) for i in range(20)],
                      **{"enable.idempotence": True})
    assert [err for err, _ in reports] == [None] * 20
    assert [m.value() for m in consume_all(kafka_broker.bootstrap, "ck-idem", 0, 20)] == [
        b"x%d" % i for i in range(20)
    ]


def test_over_limit_message_is_refused(broker_factory):
    broker = broker_factory({"message.max.bytes": "100000"})
    conf = {"message.max.bytes": 1_000_000, "linger.ms": 0}
    [(err, _)] = produce(broker.bootstrap, "ck-limit", [(None, b"y" * 200_000, None)], **conf)
    assert err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    # The refusal cost that batch only: the partition takes the next one at offset 0.
    [(err, msg)] = produce(broker.bootstrap, "ck-limit", [(None, b"small", None)], **conf)
    assert (err, msg.offset()) == (None, 0)


def test_large_message_round_trip_and_restart_keeps_everything(kafka_broker):
    big = bytes(range(256)) * (900_000 // 256)
    [(err, msg)] = produce(kafka_broker.bootstrap, "ck-big", [(b"big", big, None)],
                           **{"message.max.bytes": 1_000_000})
    assert (err, msg.offset()) == (None, 0)
    produce(kafka_broker.bootstrap, "ck-big", [(None, b"after-%d" % i, None) for i in range(5)])
    kafka_broker.restart()
    records = consume_all(kafka_broker.bootstrap, "ck-big", 0, 6)
    assert [m.value() for m in records] == [big] + [b"after-%d" % i for i in range(5)]
    assert [m.offset() for m in records] == list(range(6))


def test_topics_whose_metric_names_collide_are_refused(kafka_broker):
    """'.' and '_' are one in metric names: Kafka refuses a_b once a.b exists, and the reverse,
    with INVALID_TOPIC_EXCEPTION naming the other; a name that does not collide is created."""
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("orders.eu", 1, 1)])["orders.eu"].result(10)
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic("orders_eu", 1, 1)])["orders_eu"].result(10)
    assert exc.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    assert "collides with existing topics: orders.eu" in exc.value.args[0].str()
    admin.create_topics([NewTopic("orders_us", 1, 1)])["orders_us"].result(10)
    assert {"orders.eu", "orders_us"} <= set(admin.list_topics(timeout=10).topics)
    assert "orders_eu" not in admin.list_topics(timeout=10).topics
