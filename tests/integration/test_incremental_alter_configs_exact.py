"""IncrementalAlterConfigs APPEND/SUBTRACT and the deprecated topic configs exactly as a
ZooKeeper-mode Kafka 3.9 broker treats them, over the raw protocol and kafka-python."""

from __future__ import annotations

from kafka.admin import AlterConfigOp, ConfigResourceType, KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource

from protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC = 2


def resource(name: str, *configs: tuple[str, int, str | None]) -> dict:
    return {"resource_type": TOPIC, "resource_name": name, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in configs]}


async def incremental(client: RawClient, *resources: dict) -> list[tuple[int, str | None]]:
    response = await client.request(INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": list(resources), "validate_only": False})
    return [(r.error_code, r.error_message) for r in response.responses]


async def described(client: RawClient, topic: str, name: str) -> str | None:
    response = await client.request(DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": [name]}],
        "include_synonyms": False, "include_documentation": False})
    [config] = response.results[0].configs
    return config.value


async def test_append_and_subtract_on_list_configs(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "lists")
    ok = [(ErrorCode.NONE, None)]
    # APPEND starts from the topic config's default and adds what is not there yet; items it
    # names twice are both added (Kafka 3.9's list validation allows repeats).
    assert await incremental(client, resource("lists", ("cleanup.policy", APPEND, "delete,compact,compact"))) == ok
    assert await described(client, "lists", "cleanup.policy") == "delete,compact,compact"
    # SUBTRACT removes one occurrence per item named.
    assert await incremental(client, resource("lists", ("cleanup.policy", SUBTRACT, "compact"))) == ok
    assert await described(client, "lists", "cleanup.policy") == "delete,compact"
    # Emptied: valid, and the log is then neither deleted by retention nor compacted.
    assert await incremental(client, resource("lists", ("cleanup.policy", SUBTRACT, "compact,delete"))) == ok
    assert await described(client, "lists", "cleanup.policy") == ""
    log = async_broker.log_manager.get_log("lists", 0)
    assert log.config.cleanup_policy == "" and not log.is_compacted
    assert log.delete_old_segments() == 0
    assert await incremental(client, resource(
        "lists", ("follower.replication.throttled.replicas", APPEND, "0:1"))) == ok
    assert await incremental(client, resource(
        "lists", ("follower.replication.throttled.replicas", APPEND, "0:2,0:1"))) == ok
    assert await described(client, "lists", "follower.replication.throttled.replicas") == "0:1,0:2"

    assert await incremental(client, resource("lists", ("retention.ms", APPEND, "1"))) == [
        (ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: retention.ms")]
    assert await incremental(client, resource("lists", ("retention.ms", SUBTRACT, "1"))) == [
        (ErrorCode.INVALID_CONFIG, "Config value subtract is not allowed for config key: retention.ms")]
    assert await incremental(client, resource("lists", ("retention.ms", SET, None))) == [
        (ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms")]
    assert await incremental(client, resource("lists", ("retention.ms", SET, "1")),
                             resource("lists", ("segment.ms", SET, "1"))) == [
        (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert await described(client, "lists", "retention.ms") == "604800000"
    await client.close()


async def test_deprecated_topic_configs_are_accepted_as_in_kafka_3_9(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "old", configs={"message.format.version": "2.8"})
    assert await incremental(client, resource(
        "old", ("message.downconversion.enable", SET, "false"),
        ("message.timestamp.difference.max.ms", SET, "60000"))) == [(ErrorCode.NONE, None)]
    assert await described(client, "old", "message.format.version") == "2.8"
    response = await client.request(ALTER_CONFIGS, 2, {"resources": [
        {"resource_type": TOPIC, "resource_name": "old", "configs": [
            {"name": "message.format.version", "value": "0.10.2-IV0"}]}], "validate_only": False})
    assert response.responses[0].error_code == ErrorCode.NONE
    assert await described(client, "old", "message.format.version") == "0.10.2-IV0"
    # Parts past a release's own are ignored, as Kafka's MetadataVersion.fromVersionString
    # (librdkafka's test 0092 sets 0.10.0.0)
    for value in ("0.10.0.0", "3.0.1", "2.8-IV1"):
        assert await incremental(client, resource(
            "old", ("message.format.version", SET, value))) == [(ErrorCode.NONE, None)], value
        assert await described(client, "old", "message.format.version") == value
    for name, value in (("message.format.version", "4.0"), ("message.format.version", "0.8"),
                        ("message.format.version", "2.8-IV2"), ("remote.storage.enable", "true"),
                        ("remote.log.copy.disable", "true")):
        [(code, _)] = await incremental(client, resource("old", (name, SET, value)))
        assert code == ErrorCode.INVALID_CONFIG, (name, value)
    await client.close()


def test_kafka_python_appends_and_subtracts(kafka_broker):
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics({"kp-lists": {"num_partitions": 1, "replication_factor": 1}})
    topic = KpConfigResource(ConfigResourceType.TOPIC, "kp-lists")
    admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-lists", {
        "cleanup.policy": (AlterConfigOp.SUBTRACT, "delete")})], incremental=True)
    assert admin.describe_configs([topic])["topic"]["kp-lists"]["cleanup.policy"]["value"] == ""
    admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-lists", {
        "cleanup.policy": (AlterConfigOp.APPEND, "compact")})], incremental=True)
    assert admin.describe_configs([topic])["topic"]["kp-lists"]["cleanup.policy"]["value"] == "compact"
    admin.close()
