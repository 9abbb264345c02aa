"""DescribeConfigs as a ZooKeeper-mode Kafka 3.9 broker answers it: Kafka's types, sources,
read-only flags and synonyms, read by kafka-python and confluent-kafka over TCP."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from broker.admin.config_describer import broker_entries
from broker.config import build_config
from protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient

DESCRIBE_CONFIGS = 32

LONG_MAX = str(2**63 - 1)


def test_broker_and_topic_configs_with_kafkas_types_and_synonyms(broker_factory):
    broker = broker_factory({"log.retention.ms": "3600000", "ssl.key.password": "hush"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics({"exact": {"num_partitions": 1, "replication_factor": 1,
                                   "configs": {"segment.bytes": "100000"}}})
    described = admin.describe_configs(
        [KpConfigResource(ConfigResourceType.BROKER, "0"),
         KpConfigResource(ConfigResourceType.TOPIC, "exact")],
        include_synonyms=True, config_filter="all")
    node, topic = described["broker"]["0"], described["topic"]["exact"]
    admin.close()

    def view(config):
        return (config["value"], config["config_source"], config["read_only"], config["config_type"],
                [(s["name"], s["value"], s["source"]) for s in config["synonyms"]])

    assert view(node["advertised.listeners"]) == (None, "DEFAULT_CONFIG", False, "STRING", [])
    assert view(node["num.partitions"]) == (
        "1", "DEFAULT_CONFIG", True, "INT", [("num.partitions", "1", "DEFAULT_CONFIG")])
    assert node["offsets.topic.replication.factor"]["config_type"] == "SHORT"
    assert node["sasl.enabled.mechanisms"]["config_type"] == "LIST"
    assert node["log.retention.bytes"]["config_type"] == "LONG"
    assert view(node["ssl.key.password"]) == (
        None, "STATIC_BROKER_CONFIG", False, "PASSWORD", [("ssl.key.password", None, "STATIC_BROKER_CONFIG")])
    assert node["ssl.key.password"]["is_sensitive"]
    # log.retention.ms has no default of its own: its synonym log.retention.hours follows it.
    assert view(node["log.retention.ms"]) == (
        "3600000", "STATIC_BROKER_CONFIG", False, "LONG",
        [("log.retention.ms", "3600000", "STATIC_BROKER_CONFIG"),
         ("log.retention.hours", "168", "DEFAULT_CONFIG")])
    assert view(node["log.roll.ms"]) == (None, "DEFAULT_CONFIG", False, "LONG", [])

    # Topic configs chain to the broker's log.* configs.
    assert view(topic["retention.ms"]) == (
        "3600000", "STATIC_BROKER_CONFIG", False, "LONG",
        [("log.retention.ms", "3600000", "STATIC_BROKER_CONFIG"),
         ("log.retention.hours", "168", "DEFAULT_CONFIG")])
    assert view(topic["segment.bytes"]) == (
        "100000", "DYNAMIC_TOPIC_CONFIG", False, "INT",
        [("segment.bytes", "100000", "DYNAMIC_TOPIC_CONFIG"),
         ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")])
    assert view(topic["segment.ms"]) == ("604800000", "DEFAULT_CONFIG", False, "LONG", [])
    assert view(topic["cleanup.policy"]) == (
        "delete", "DEFAULT_CONFIG", False, "LIST", [("log.cleanup.policy", "delete", "DEFAULT_CONFIG")])
    assert topic["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE"
    assert view(topic["message.format.version"]) == (
        "3.0-IV1", "DEFAULT_CONFIG", False, "STRING",
        [("log.message.format.version", "3.0-IV1", "DEFAULT_CONFIG")])
    assert view(topic["message.timestamp.after.max.ms"])[:2] == (LONG_MAX, "DEFAULT_CONFIG")
    assert view(topic["leader.replication.throttled.replicas"]) == ("", "DEFAULT_CONFIG", False, "LIST", [])
    assert len(topic) == 36  # every topic config Kafka 3.9 defines (LogConfig)


def test_confluent_sees_sources_read_only_and_synonyms(kafka_broker):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("ck-exact", 1, 1, config={"cleanup.policy": "compact"})])[
        "ck-exact"].result(10)
    # librdkafka asks for synonyms itself.
    [node] = admin.describe_configs([ConfigResource("broker", "0")]).values()
    node = node.result(10)
    listeners = node["advertised.listeners"]
    assert (listeners.value, listeners.source, listeners.is_read_only) == (
        None, ConfigSource.DEFAULT_CONFIG.value, False)
    assert node["broker.id"].is_read_only and not node["message.max.bytes"].is_read_only
    [topic] = admin.describe_configs([ConfigResource("topic", "ck-exact")]).values()
    policy = topic.result(10)["cleanup.policy"]
    assert (policy.value, policy.source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert [(s.name, s.value, s.source) for s in policy.synonyms.values()] == [
        ("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG.value)]


async def test_broker_resource_names_as_kafka_reads_them(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 4, "resource_name": name, "configuration_keys": None}
        for name in ("", "0", "x", "7")], "include_synonyms": False, "include_documentation": False})
    await client.close()
    cluster, node, bad, other = response.results
    # "" holds the cluster-wide dynamic defaults: none here, as on a fresh Kafka.
    assert (cluster.error_code, list(cluster.configs)) == (ErrorCode.NONE, [])
    assert node.error_code == ErrorCode.NONE and len(node.configs) > 50
    assert (bad.error_code, bad.error_message) == (
        ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: x")
    assert (other.error_code, other.error_message) == (
        ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 7")


def test_every_broker_property_kafka_has_is_described_with_kafkas_type():
    kafka = json.loads((Path(__file__).resolve().parents[1] / "data" /
                        "kafka_3_9_broker_config_types.json").read_text())["types"]
    names = {1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 7: "LIST", 9: "PASSWORD"}
    described = {e.name: names[e.config_type] for e in broker_entries(build_config({}))}
    assert {name: described[name] for name in kafka} == kafka
