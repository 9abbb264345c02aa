"""LogConfig: Kafka property names, defaults, validation, printing."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode, KafkaError
from storage.log_config import TOPIC_CONFIG_DEFAULTS, LogConfig


def test_defaults_are_kafkas() -> None:
    props = LogConfig().to_properties()
    assert props["segment.bytes"] == "1073741824"
    assert props["retention.ms"] == "604800000"
    assert props["max.message.bytes"] == "1048588"
    assert props["message.timestamp.type"] == "CreateTime"
    assert props["cleanup.policy"] == "delete"
    assert set(props) == set(TOPIC_CONFIG_DEFAULTS)


def test_from_properties_overlays_defaults() -> None:
    base = LogConfig.from_properties({"retention.ms": "1000"})
    config = LogConfig.from_properties(
        {"segment.bytes": "1024", "message.timestamp.type": "LogAppendTime",
         "cleanup.policy": "compact, delete", "preallocate": "TRUE"},
        defaults=base,
    )  # fmt: skip
    assert config.segment_bytes == 1024 and config.retention_ms == 1000
    assert config.log_append_time and config.cleanup_policy == "compact,delete"
    assert config.preallocate is True
    assert LogConfig.from_properties(config.to_properties()) == config
    described = {name: (value, default) for name, value, default in config.describe()}
    assert described["segment.bytes"] == ("1024", False)
    assert described["flush.ms"] == (str(2**63 - 1), True)


@pytest.mark.parametrize(
    "props",
    [
        {"no.such.config": "1"},
        {"segment.bytes": "10"},
        {"segment.bytes": "abc"},
        {"segment.bytes": str(2**31)},
        {"retention.ms": "-2"},
        {"message.timestamp.type": "Whenever"},
        {"cleanup.policy": "shred"},
        {"min.insync.replicas": "0"},
        {"preallocate": "maybe"},
        {"min.cleanable.dirty.ratio": "1.5"},
    ],
)
def test_invalid_configs(props: dict[str, str]) -> None:
    with pytest.raises(KafkaError) as info:
        LogConfig.from_properties(props)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert next(iter(props)) in info.value.message
