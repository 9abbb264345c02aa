"""kafka-python against a real broker over TCP: admin, produce/consume with every codec, limits."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import MessageSizeTooLargeError, TopicAlreadyExistsError

from protocol.records import decode_batch, iter_batches

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def consume_all(bootstrap: str, topic: str, partition: int, count: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition(topic, partition)])
    records = []
    for record in consumer:
        records.append(record)
        if len(records) == count:
            break
    consumer.close()
    return records


def test_admin_create_describe_delete(kafka_broker):
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics({"kp-admin": {"num_partitions": 3, "replication_factor": 1,
                                      "configs": {"retention.ms": "123456"}}})
    assert "kp-admin" in admin.list_topics()
    [described] = admin.describe_topics(["kp-admin"])
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "kp-admin")], config_filter="all"
    )
    topic_configs = configs["topic"]["kp-admin"]
    assert topic_configs["retention.ms"]["value"] == "123456"
    assert topic_configs["segment.bytes"]["value"] == "1073741824"
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics({"kp-admin": {"num_partitions": 1}})
    admin.delete_topics(["kp-admin"])
    assert "kp-admin" not in admin.list_topics()
    assert not (kafka_broker.data_dir / "kp-admin-0").exists()
    admin.close()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(kafka_broker, codec):
    topic = f"kp-{codec or 'none'}"
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, compression_type=codec,
                             linger_ms=20)
    sent = [(f"key-{i}".encode(), f"value-{i}".encode() * 20, [("h", f"{i}".encode())])
            for i in range(200)]
    futures = [producer.send(topic, key=k, value=v, headers=h) for k, v, h in sent]
    producer.flush()
    offsets = [f.get(timeout=10).offset for f in futures]
    assert offsets == list(range(200))
    producer.close()

    records = consume_all(kafka_broker.bootstrap, topic, 0, 200)
    assert [r.offset for r in records] == list(range(200))
    assert [(r.key, r.value, [(k, v) for k, v in r.headers]) for r in records] == [
        (k, v, h) for k, v, h in sent
    ]

    # The broker stored the batches as the client compressed them; decode them from disk too.
    log_bytes = b"".join(p.read_bytes() for p in sorted((kafka_broker.data_dir / f"{topic}-0").glob("*.log")))
    stored = []
    for pos, header in iter_batches(log_bytes):
        assert header.compression == CODECS.index(codec)
        stored.extend(decode_batch(log_bytes, pos)[1])
    assert [(r.offset, r.key, r.value) for r in stored] == [(i, k, v) for i, (k, v, _) in enumerate(sent)]


def test_large_message_round_trip_and_over_limit(broker_factory):
    broker = broker_factory({"message.max.bytes": "1048588"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=4_000_000)
    big = bytes(range(256)) * (900_000 // 256)
    assert producer.send("kp-big", value=big).get(timeout=10).offset == 0
    with pytest.raises(MessageSizeTooLargeError):
        producer.send("kp-big", value=b"x" * 1_500_000).get(timeout=10)
    producer.close()
    [record] = consume_all(broker.bootstrap, "kp-big", 0, 1)
    assert record.value == big


def test_restart_keeps_topics_configs_and_data(kafka_broker):
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics({"kp-durable": {"num_partitions": 2, "configs": {"retention.bytes": "999999"}}})
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    for i in range(50):
        producer.send("kp-durable", value=b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()

    kafka_broker.restart()

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-durable")])
    assert configs["topic"]["kp-durable"]["retention.bytes"]["value"] == "999999"
    admin.close()
    for partition in (0, 1):
        records = consume_all(kafka_broker.bootstrap, "kp-durable", partition, 25)
        assert [r.value for r in records] == [b"v%d" % i for i in range(partition, 50, 2)]


def test_list_offsets_earliest_latest_and_by_timestamp(kafka_broker):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    for i in range(10):
        producer.send("kp-times", value=b"%d" % i, timestamp_ms=1_000_000 + i * 1000)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap)
    tp = TopicPartition("kp-times", 0)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 10}
    found = consumer.offsets_for_times({tp: 1_004_500})[tp]
    assert (found.offset, found.timestamp) == (5, 1_005_000)
    assert consumer.offsets_for_times({tp: 2_000_000})[tp] is None
    consumer.close()


def test_readme_example_works_as_written(kafka_broker, capsys):
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = re.search(r"## Use it from kafka-python.*?```python\n(.*?)```", readme, re.S).group(1)
    exec(example.replace("localhost:9092", kafka_broker.bootstrap), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{i} b'k{i}' b'hello {i}' [('lang', b'en')]" for i in range(3)]
