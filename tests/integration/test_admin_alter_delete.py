"""AlterConfigs, IncrementalAlterConfigs and DeleteRecords from kafka-python and confluent-kafka
against a 3-broker cluster over TCP: topic overrides change and show as dynamic, broker configs are
refused as read-only, and deleted records are gone on every replica."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResourceType, KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource

DYNAMIC_TOPIC_CONFIG = 1


def log_start_offsets(broker, topic: str) -> list[int]:
    return sorted(b.log_manager.get_log(topic, 0).log_start_offset
                  for b in broker.cluster.brokers.values())


def wait_for(condition, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.05)


def test_kafka_python_alter_configs_and_delete_records(broker_factory):
    broker = broker_factory(brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics({"kp-alter": {"num_partitions": 1, "replication_factor": 3}})
    topic = KpConfigResource(ConfigResourceType.TOPIC, "kp-alter")

    admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-alter", {
        "retention.ms": "3600000", "max.message.bytes": (AlterConfigOp.SET, "2000")})])
    admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-alter", {
        "cleanup.policy": (AlterConfigOp.APPEND, "compact")})])
    configs = admin.describe_configs([topic])["topic"]["kp-alter"]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["cleanup.policy"]["value"] == "delete,compact"
    admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-alter", {
        "cleanup.policy": (AlterConfigOp.DELETE, None)})], incremental=True)
    admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-alter", {
        "retention.ms": "3600000", "max.message.bytes": "2000"})], incremental=False)
    wait_for(lambda: all(b.log_manager.get_log("kp-alter", 0).config.cleanup_policy == "delete"
                         and b.log_manager.get_log("kp-alter", 0).config.max_message_bytes == 2000
                         for b in broker.cluster.brokers.values()))

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(10):
        producer.send("kp-alter", value=b"v%d" % i)
    producer.flush()
    with pytest.raises(Exception, match="MessageSizeTooLarge"):
        producer.send("kp-alter", value=b"x" * 3000).get(10)
    producer.close()

    tp = TopicPartition("kp-alter", 0)
    result = admin.delete_records({tp: 4})
    assert result[tp]["low_watermark"] == 4
    assert log_start_offsets(broker, "kp-alter") == [4, 4, 4]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert consumer.beginning_offsets([tp]) == {tp: 4}
    consumer.close()
    admin.close()


def test_confluent_alter_configs_and_delete_records(broker_factory):
    broker = broker_factory(brokers=3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ck-alter", 1, 3)])["ck-alter"].result(10)

    resource = ConfigResource("topic", "ck-alter", incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    [future] = admin.incremental_alter_configs([resource]).values()
    future.result(10)
    [described] = admin.describe_configs([ConfigResource("topic", "ck-alter")]).values()
    configs = described.result(10)
    assert configs["retention.ms"].value == "7200000"
    assert configs["retention.ms"].source == DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].is_default

    bad = ConfigResource("topic", "ck-alter", set_config={"retention.ms": "soon"})
    with pytest.raises(KafkaException) as exc:
        [f] = admin.alter_configs([bad]).values()
        f.result(10)
    assert exc.value.args[0].code() == 40  # INVALID_CONFIG
    read_only = ConfigResource("broker", "0", incremental_configs=[
        ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        [f] = admin.incremental_alter_configs([read_only]).values()
        f.result(10)
    assert "Cannot update these configs dynamically" in str(exc.value)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("ck-alter", b"v%d" % i)
    assert producer.flush(10) == 0
    [future] = admin.delete_records([CkTopicPartition("ck-alter", 0, -1)]).values()
    deleted = future.result(10)
    assert deleted.low_watermark == 10
    wait_for(lambda: log_start_offsets(broker, "ck-alter") == [10, 10, 10])


def test_the_control_token_is_described_as_sensitive(broker_factory):
    """As Kafka's PASSWORD configs: DescribeConfigs names it, marks it sensitive, never shows it."""
    broker = broker_factory({"control.token": "s3cret"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [described] = admin.describe_configs([ConfigResource("broker", "0")]).values()
    configs = described.result(10)
    token = configs["control.token"]
    assert (token.value, token.is_sensitive, token.is_default) == (None, True, False)
    assert not configs["control.listener"].is_sensitive
    assert all("s3cret" not in str(c.value) for c in configs.values())
