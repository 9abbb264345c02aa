"""Log compaction seen by kafka-python: many updates to few keys in a compacted topic, a forced clean,
then a consumer from the beginning sees the latest value per key (plus the active segment)."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidRecordError

from protocol.records import decode_batch, iter_batches

TOPIC = "compacted"


def consume_until_end(bootstrap: str, end: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition(TOPIC, 0)])
    records = []
    for record in consumer:
        records.append(record)
        if record.offset == end - 1:
            break
    consumer.close()
    return records


def test_compacted_topic_keeps_latest_value_per_key(broker_factory):
    cluster = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics({TOPIC: {"num_partitions": 1, "replication_factor": 1, "configs": {
        "cleanup.policy": "compact", "segment.bytes": "1024"}}})
    admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    updates = [(b"key-%d" % (i % 4), b"value-%d" % i) for i in range(200)]
    for key, value in updates:
        producer.send(TOPIC, key=key, value=value, partition=0).get(10)
    with pytest.raises(InvalidRecordError):  # Kafka's LogValidator: no key, no compacted topic
        producer.send(TOPIC, key=None, value=b"no key", partition=0).get(10)
    producer.close()

    log = cluster.call(lambda: cluster.cluster.brokers[0].log_manager.get_log(TOPIC, 0))
    assert cluster.call(lambda: log.high_watermark) == len(updates)
    assert cluster.call(lambda: cluster.cluster.brokers[0].log_manager.clean_logs(force=True)) == 1
    active_base = cluster.call(lambda: log.active_segment.base_offset)
    assert active_base > 0

    records = consume_until_end(cluster.bootstrap, len(updates))
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)) and offsets[-1] == len(updates) - 1
    below = [(r.offset, r.key, r.value) for r in records if r.offset < active_base]
    latest_below = {k: o for o, (k, _) in enumerate(updates[:active_base])}
    assert sorted(below) == sorted((o, k, updates[o][1]) for k, o in latest_below.items())
    above = [(r.offset, r.key, r.value) for r in records if r.offset >= active_base]
    assert above == [(o, k, v) for o, (k, v) in enumerate(updates) if o >= active_base]
    assert {r.key: r.value for r in records} == dict(updates)

    # the cleaned segments on disk hold well-formed batches with their original offsets
    data = cluster.call(lambda: log.read(0, 1 << 20, max_offset=active_base).records)
    decoded = [r.offset for pos, _ in iter_batches(data) for r in decode_batch(data, pos)[1]]
    assert decoded == sorted(o for o in latest_below.values())
