"""ListOffsets MAX_TIMESTAMP (-3, KIP-734) answers the offset of the first record carrying the
partition's largest timestamp, inside its batch, as Kafka 3.9 does; read by two real clients."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaAdminClient, TopicPartition
from kafka.protocol.consumer.offsets import OffsetSpec as KOffsetSpec

# One batch: the largest timestamp is the second of five records, and the fourth has it too.
TIMESTAMPS = [1_000_000, 1_009_000, 1_003_000, 1_009_000, 1_002_000]


def produce_one_batch(bootstrap: str, topic: str, codec: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200,
                         "compression.type": codec})
    for i, ts in enumerate(TIMESTAMPS):
        producer.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts)
    assert producer.flush(10) == 0


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_max_timestamp_is_the_record_inside_the_batch(kafka_broker, codec):
    topic = f"max-ts-{codec}"
    produce_one_batch(kafka_broker.bootstrap, topic, codec)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    tp = CTopicPartition(topic, 0)
    answer = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert (answer.offset, answer.timestamp) == (1, 1_009_000)  # not 4, the batch's last offset

    kp_admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    try:
        found = kp_admin.list_partition_offsets({TopicPartition(topic, 0): KOffsetSpec.MAX_TIMESTAMP})
        assert (found[TopicPartition(topic, 0)].offset,
                found[TopicPartition(topic, 0)].timestamp) == (1, 1_009_000)
    finally:
        kp_admin.close()
