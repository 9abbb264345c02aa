"""Dynamic broker configs (Kafka's DynamicBrokerConfig) over a real listener: a broker's own
settings and the cluster defaults, altered with confluent-kafka's AdminClient, kept in the
metadata store, described with their dynamic source, and the log settings among them applied to
every log without an override of its own."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient

INCREMENTAL_ALTER_CONFIGS = 44
DYNAMIC_BROKER, DYNAMIC_DEFAULT = (ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
SET, DELETE, APPEND, SUBTRACT = (AlterConfigOpType.SET, AlterConfigOpType.DELETE,
                                 AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT)


def alter(admin: AdminClient, broker: str, *changes: tuple[str, AlterConfigOpType, str]) -> None:
    resource = ConfigResource("broker", broker, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, op, value in changes])
    admin.incremental_alter_configs([resource])[resource].result(10)


def alter_default(port: int, *changes: tuple[str, AlterConfigOpType, str]) -> tuple[int, str]:
    """The cluster default (BROKER resource ""), which librdkafka does not send: a raw request."""
    async def send() -> tuple[int, str]:
        client = await RawClient.connect(port)
        response = await client.request(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": 4, "resource_name": "", "configs": [
                {"name": name, "config_operation": op.value, "value": value}
                for name, op, value in changes]}], "validate_only": False})
        await client.close()
        (result,) = response.responses
        return result.error_code, result.error_message

    return asyncio.run(send())


def described(admin: AdminClient, kind: str, name: str) -> dict:
    (future,) = admin.describe_configs([ConfigResource(kind, name)]).values()
    return future.result(10)


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def log_config(kafka_broker, topic: str):
    return kafka_broker.call(lambda: kafka_broker.cluster.brokers[0].replica_manager.partitions[
        (topic, 0)].log.config)


def test_a_broker_setting_and_a_cluster_default_apply_to_logs_and_describe(kafka_broker):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(10)
    alter(admin, "0", ("log.retention.ms", SET, "3600000"))
    wait_for(lambda: log_config(kafka_broker, "plain").retention_ms == 3_600_000,
             "the broker's log setting applied")
    broker = described(admin, "broker", "0")["log.retention.ms"]
    assert (broker.value, broker.source, broker.is_read_only) == ("3600000", DYNAMIC_BROKER, False)
    topic = described(admin, "topic", "plain")["retention.ms"]
    assert (topic.value, topic.source) == ("3600000", DYNAMIC_BROKER)
    # The cluster default (resource name ""): a list setting appended to, then subtracted from
    assert alter_default(kafka_broker.port, ("log.cleanup.policy", APPEND, "compact"))[0] == 0
    wait_for(lambda: log_config(kafka_broker, "plain").cleanup_policy == "delete,compact",
             "the cluster default applied")
    policy = described(admin, "topic", "plain")["cleanup.policy"]
    assert (policy.value, policy.source) == ("delete,compact", DYNAMIC_DEFAULT)
    # A topic made now takes them at once
    admin.create_topics([NewTopic("later", 1, 1)])["later"].result(10)
    wait_for(lambda: (log_config(kafka_broker, "later").retention_ms,
                      log_config(kafka_broker, "later").cleanup_policy)
             == (3_600_000, "delete,compact"), "a new topic's logs take them")
    assert alter_default(kafka_broker.port, ("log.cleanup.policy", SUBTRACT, "compact"))[0] == 0
    alter(admin, "0", ("log.retention.ms", DELETE, ""))
    wait_for(lambda: (log_config(kafka_broker, "plain").retention_ms,
                      log_config(kafka_broker, "plain").cleanup_policy)
             == (604_800_000, "delete"), "back to the static settings")


def test_settings_kafka_changes_live_are_kept_others_refused(kafka_broker):
    """What librdkafka's admin test alters (background.threads, a kerberos setting) is kept and
    described; what Kafka cannot change live, or gives one broker only, is refused as Kafka
    refuses it."""
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    alter(admin, "0", ("background.threads", SET, "9"),
          ("sasl.kerberos.min.time.before.relogin", SET, "58000"))
    configs = described(admin, "broker", "0")
    assert (configs["background.threads"].value, configs["background.threads"].source) == (
        "9", DYNAMIC_BROKER)
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "58000"
    alter(admin, "0", ("background.threads", DELETE, ""))
    assert "background.threads" not in described(admin, "broker", "0")
    assert alter_default(kafka_broker.port, ("listeners", SET, "PLAINTEXT://:1")) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, broker "
                                   "id must be specified: Set(listeners)")
    refusals = [
        ("0", "log.dirs", "/elsewhere", "Cannot update these configs dynamically: Set(log.dirs)"),
        ("0", "log.retention.ms", "soon", "Invalid config value for resource "
                                          "ConfigResource(type=BROKER, name='0')"),
    ]
    for broker, name, value, message in refusals:
        with pytest.raises(KafkaException) as refused:
            alter(admin, broker, (name, SET, value))
        assert message in str(refused.value), refused.value
