"""Broker properties: Kafka names, precedence (defaults < file < env < overrides), bad values."""

from __future__ import annotations

import pytest

from broker.config import ConfigError, build_config, parse_listener, parse_overrides
from broker.metadata.embedded_store import EmbeddedMetadataStore
from broker.metadata.producer_id_manager import BLOCK_SIZE, ProducerIdManager
from broker.metadata.topic_names import validate_topic_name
from broker.network.connection_quotas import ConnectionQuotas
from protocol.errors import ErrorCode, KafkaError


def test_precedence_file_env_override(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# a comment\nnum.partitions=2\nlog.segment.bytes = 4096\nbroker.id=7\n")
    config = build_config({"broker.id": "9"}, properties_file=props,
                          environ={"KAFKA_SIM_NUM_PARTITIONS": "5", "UNRELATED": "x"})
    assert config["num.partitions"] == 5
    assert config["log.segment.bytes"] == 4096
    assert config.broker_id == 9
    assert config.log_config().segment_bytes == 4096
    assert {"num.partitions", "log.segment.bytes", "broker.id"} <= config.explicit


def test_defaults_and_listener():
    config = build_config(environ={})
    assert config.listener == ("127.0.0.1", 9092)
    assert config["auto.create.topics.enable"] is True
    assert config["message.max.bytes"] == 1048588
    assert parse_listener("PLAINTEXT://[::1]:9093") == ("::1", 9093)


@pytest.mark.parametrize("overrides", [{"no.such.property": "1"}, {"num.partitions": "many"},
                                       {"auto.create.topics.enable": "perhaps"},
                                       {"listeners": "PLAINTEXT://nohost"}])
def test_bad_properties_are_refused_with_a_message(overrides):
    with pytest.raises(ConfigError):
        build_config(overrides, environ={})


def test_parse_overrides():
    assert parse_overrides(["a.b=1", "c = x=y"]) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


@pytest.mark.parametrize("name", ["", ".", "..", "a b", "a/b", "x" * 250, "é", "bad\n", "\nbad",
                                  "a\nb", "bad\r\n"])
def test_invalid_topic_names(name):
    with pytest.raises(KafkaError) as exc:
        validate_topic_name(name)
    assert exc.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 249, "__consumer_offsets"])
def test_valid_topic_names(name):
    validate_topic_name(name)


async def test_producer_ids_come_in_blocks_that_survive_a_restart(tmp_path):
    store = EmbeddedMetadataStore(tmp_path / "store")
    first, second = ProducerIdManager(store, 0), ProducerIdManager(store, 1)
    assert [await first.generate_producer_id() for _ in range(3)] == [0, 1, 2]
    assert await second.generate_producer_id() == BLOCK_SIZE  # its own block
    ids = [await first.generate_producer_id() for _ in range(BLOCK_SIZE - 3)]
    assert ids[-1] == BLOCK_SIZE - 1
    # block exhausted: the next free one
    assert await first.generate_producer_id() == 2 * BLOCK_SIZE
    # A restart reads the latest block from disk: ids are never handed out twice.
    store.close()
    store = EmbeddedMetadataStore(tmp_path / "store")
    assert await ProducerIdManager(store, 0).generate_producer_id() == 3 * BLOCK_SIZE
    assert await ProducerIdManager(store, 1).generate_producer_id() == 4 * BLOCK_SIZE


async def test_producer_id_blocks_are_claimed_by_racing_brokers_and_never_past_long_max(
        tmp_path):
    """Twenty brokers claiming at once: each retries its lost races until it wins a block of
    its own (Kafka retries; giving up after some losses refused producers). No block reaches
    past Long.MAX_VALUE: the last is refused (Kafka's "exhausted all producerIds")."""
    import asyncio

    store = EmbeddedMetadataStore(tmp_path / "store")
    writes = {"create_json": store.create_json, "set_json": store.set_json}

    def after_the_others(write):  # every claimer reads the block before any writes: races
        async def later(*args, **kwargs):
            await asyncio.sleep(0)
            return await write(*args, **kwargs)
        return later

    for name, write in writes.items():
        setattr(store, name, after_the_others(write))
    managers = [ProducerIdManager(store, b) for b in range(20)]
    firsts = await asyncio.gather(*(m.generate_producer_id() for m in managers))
    assert sorted(firsts) == [n * BLOCK_SIZE for n in range(20)]
    await store.set_json("/latest_producer_id_block", {
        "version": 1, "broker": 0, "block_start": str(2**63 - 2 * BLOCK_SIZE),
        "block_end": str(2**63 - BLOCK_SIZE - 1)})
    last = ProducerIdManager(store, 21)
    assert await last.generate_producer_id() == 2**63 - BLOCK_SIZE  # the last whole block
    with pytest.raises(KafkaError) as exc:
        await ProducerIdManager(store, 22).generate_producer_id()
    assert exc.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "exhausted all producerIds" in exc.value.message
    store.close()


def test_the_configuration_table_lists_every_property():
    from broker.config import PROPERTIES
    from tests.docs import ROOT

    table = (ROOT / "docs" / "configuration.md").read_text()
    for prop in PROPERTIES:
        assert f"| `{prop.name}` | `{prop.default}` | {prop.doc} |" in table, prop.name


def test_connection_limits_parse_as_kafka_writes_them():
    config = build_config({"max.connections.per.ip.overrides": "127.0.0.1:3, [::1]:5"}, environ={})
    assert config["max.connections.per.ip.overrides"] == {"127.0.0.1": 3, "::1": 5}
    assert config["max.connections"] == config["max.connections.per.ip"] == 2147483647
    assert build_config({}, environ={})["max.connections.per.ip.overrides"] == {}
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        build_config({"max.connections.per.ip.overrides": "127.0.0.1"}, environ={})


def test_connection_quotas_count_per_ip_and_in_all():
    quotas = ConnectionQuotas(3, 2, {"10.0.0.1": 0})
    assert quotas.try_acquire("127.0.0.1") is None
    assert quotas.try_acquire("127.0.0.1") is None
    assert "max.connections.per.ip is 2" in quotas.try_acquire("127.0.0.1")
    assert "max.connections.per.ip is 0" in quotas.try_acquire("10.0.0.1")
    assert quotas.try_acquire("127.0.0.2") is None
    assert "max.connections is 3" in quotas.try_acquire("127.0.0.3")
    quotas.release("127.0.0.1")
    assert quotas.try_acquire("127.0.0.3") is None
    assert quotas.total == 3 and quotas.per_ip == {"127.0.0.1": 1, "127.0.0.2": 1, "127.0.0.3": 1}


def test_quota_windows_are_at_least_one():
    config = build_config({"quota.window.num": "2", "quota.window.size.seconds": "3"}, environ={})
    assert (config["quota.window.num"], config["quota.window.size.seconds"]) == (2, 3)
    for name in ("quota.window.num", "quota.window.size.seconds"):
        with pytest.raises(ConfigError, match=name):
            build_config({name: "0"}, environ={})
