"""DescribeLogDirs and AlterReplicaLogDirs through kafka-python's admin client (confluent-kafka 2.16's
AdminClient and aiokafka's admin have neither), against a broker with two log dirs: sizes, lags, the
error codes Kafka answers, and a replica moved to the other dir with its records intact."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaStorageError, LogDirNotFoundError, NoError, ReplicaNotAvailableError


def dirs_of(described: list[dict]) -> dict[str, dict]:
    [broker] = described
    return {d["log_dir"]: d for d in broker["log_dirs"]}


def partitions_in(log_dir: dict, topic: str) -> dict[int, dict]:
    return {p["partition_index"]: p for t in log_dir["topics"] if t["name"] == topic
            for p in t["partitions"]}


@pytest.fixture
def two_dir_broker(broker_factory, tmp_path: Path):
    a, b = os.path.abspath(tmp_path / "a"), os.path.abspath(tmp_path / "b")
    broker = broker_factory({"log.dirs": f"{a},{b}", "log.cleaner.enable": "false"})
    return broker, os.path.join(a, "broker-0"), os.path.join(b, "broker-0")


def test_describe_and_alter_log_dirs_with_kafka_python(two_dir_broker):
    broker, a, b = two_dir_broker
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("ld", 2, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        for i in range(20):
            producer.send("ld", value=b"v%d" % i, partition=i % 2)
        producer.flush()

        dirs = dirs_of(admin.describe_log_dirs())
        assert sorted(dirs) == [a, b]
        for path, partition in ((a, 0), (b, 1)):  # one each: the emptier dir takes the next
            assert dirs[path]["error_code"] == 0
            [(index, info)] = partitions_in(dirs[path], "ld").items()
            assert index == partition and info["partition_size"] > 0
            assert info["offset_lag"] == 0 and info["is_future_key"] is False
            assert 0 < dirs[path]["usable_bytes"] <= dirs[path]["total_bytes"]
        filtered = dirs_of(admin.describe_log_dirs({"ld": [1]}))
        assert partitions_in(filtered[a], "ld") == {} and list(partitions_in(filtered[b], "ld")) == [1]

        moved = admin.alter_replica_log_dirs({("ld", 0, 0): b, ("ld", 1, 0): b,
                                              ("ld", 7, 0): b, ("nope", 0, 0): b})
        assert {(r.topic, r.partition): e for r, e in moved.items()} == {
            ("ld", 0): NoError, ("ld", 1): NoError,  # already there: nothing to do
            ("ld", 7): ReplicaNotAvailableError, ("nope", 0): ReplicaNotAvailableError}
        wrong = admin.alter_replica_log_dirs({("ld", 0, 0): "/no/such/dir"})
        assert list(wrong.values()) == [LogDirNotFoundError]

        movers = broker.cluster.brokers[0].replica_manager.alter_log_dirs
        broker.call(lambda: asyncio.wait_for(movers.swapped[("ld", 0)].wait(), 30))
        dirs = dirs_of(admin.describe_log_dirs())
        assert partitions_in(dirs[a], "ld") == {} and sorted(partitions_in(dirs[b], "ld")) == [0, 1]
        assert not os.path.exists(os.path.join(a, "ld-0"))
        assert os.path.isdir(os.path.join(b, "ld-0"))
        broker.cluster.brokers[0].log_manager.flusher.drain()  # the old copy is removed there
        assert not [n for n in os.listdir(a) + os.listdir(b) if n.endswith(("-future", "-delete"))]
        for i in range(20, 24):  # the moved replica takes appends at the right offsets
            producer.send("ld", value=b"v%d" % i, partition=0)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 consumer_timeout_ms=3000)
        consumer.assign([TopicPartition("ld", 0)])
        got = [(r.offset, r.value) for r in consumer]
        consumer.close()
        assert got == [(n, b"v%d" % i) for n, i in enumerate([*range(0, 20, 2), *range(20, 24)])]
    finally:
        admin.close()


def test_an_offline_dir_answers_kafka_storage_error(two_dir_broker):
    broker, a, b = two_dir_broker
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("off", 2, 1)])  # off-0 in a, off-1 in b
        broker.cluster.add_disk_fault(0, "write", "EIO", log_dir=b)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
        failed = producer.send("off", value=b"x", partition=1)
        with pytest.raises(KafkaStorageError):
            failed.get(timeout=10)
        assert producer.send("off", value=b"y", partition=0).get(timeout=10).offset == 0
        producer.close()
        dirs = dirs_of(admin.describe_log_dirs())
        assert dirs[b]["error_code"] == KafkaStorageError.errno and dirs[b]["topics"] == []
        assert dirs[a]["error_code"] == 0 and list(partitions_in(dirs[a], "off")) == [0]
        moved = admin.alter_replica_log_dirs({("off", 0, 0): b, ("off", 1, 0): a})
        assert {r.partition: e for r, e in moved.items()} == {
            0: KafkaStorageError,  # the destination is offline
            1: KafkaStorageError}  # the replica is on an offline dir
    finally:
        admin.close()
