"""Topic-level log configuration under Kafka's property names, with defaults and validation.

The table TOPIC_CONFIG_DEFAULTS drives parsing, printing and DescribeConfigs; LogConfig holds values.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol.compression_type import GZIP, LZ4, ZSTD
from protocol.errors import ErrorCode, KafkaError

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
# producer.id.expiration.ms: how long an idle producer id's state is kept (a broker setting)
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CODECS = ("uncompressed", "gzip", "snappy", "lz4", "zstd")  # by codec id


@dataclass(slots=True)
class LogConfig:
    """One log's settings, Kafka's topic-level configs (their `log.*` broker defaults apply)."""
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_bytes: int = -1
    retention_ms: int = 604800000
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    cleanup_policy: str = "delete"
    min_insync_replicas: int = 1
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    # Accepted so that admin clients can set them; this broker does not act on
    # max_compaction_lag_ms and those below them (the log cleaner acts on the other three).
    compression_type: str = "producer"
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    segment_jitter_ms: int = 0
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    message_timestamp_difference_max_ms: int = LONG_MAX
    # KIP-937: either bound, left at LONG_MAX, falls back to message.timestamp.difference.max.ms.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    # The codecs' levels, for batches recompressed to compression.type. Kafka 3.9 topic configs
    # accepted and reported with Kafka's defaults, not acted on here: the deprecated message format
    # (always v2) and down-conversion, replication throttles (no quotas), tiered storage (only
    # "off" is valid without a remote storage system, as Kafka's ZK-mode validation says).
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    message_format_version: str = "3.0-IV1"
    message_downconversion_enable: bool = True
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @property
    def timestamp_before_max_ms(self) -> int:
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compression_target(self) -> tuple[int, int | None] | None:
        """The codec (and its level) every batch is stored with, None for "producer": batches
        are kept as compressed (Kafka's BrokerCompressionType)."""
        if self.compression_type == "producer":
            return None
        codec = CODECS.index(self.compression_type)
        level = {GZIP: self.compression_gzip_level, LZ4: self.compression_lz4_level,
                 ZSTD: self.compression_zstd_level}.get(codec)
        return codec, level

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Overlay Kafka-named string properties on defaults; INVALID_CONFIG for unknown or bad ones."""
        values: dict[str, Any] = {}
        for name, raw in props.items():
            spec = TOPIC_CONFIG_DEFAULTS.get(name)
            if spec is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {name!r}")
            values[spec.attr] = spec.parse(name, raw)
        base = defaults if defaults is not None else cls()
        config = dataclasses.replace(base, **values)
        if values:
            config._validate_combination()
        return config

    def _validate_combination(self) -> None:
        """Kafka's checks across topic configs (LogConfig.validate in ZooKeeper mode)."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "conflict topic config setting "
                             f"min.compaction.lag.ms ({self.min_compaction_lag_ms}) > "
                             f"max.compaction.lag.ms ({self.max_compaction_lag_ms})")
        if self.remote_log_delete_on_disable or self.remote_log_copy_disable:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "It is invalid to set "
                             "`remote.log.delete.on.disable` or `remote.log.copy.disable` under "
                             "Zookeeper's mode.")
        if self.remote_storage_enable:  # no remote storage system here
            raise KafkaError(ErrorCode.INVALID_CONFIG, "Tiered Storage functionality is disabled "
                             "in the broker. Topic cannot be configured with remote log storage.")

    def to_properties(self) -> dict[str, str]:
        return {
            name: spec.render(getattr(self, spec.attr))
            for name, spec in TOPIC_CONFIG_DEFAULTS.items()
        }

    def describe(self, defaults: LogConfig | None = None) -> list[tuple[str, str, bool]]:
        """(name, value, is_default) per config, is_default meaning equal to `defaults`' value."""
        base = defaults if defaults is not None else LogConfig()
        return [
            (name, spec.render(getattr(self, spec.attr)),
             getattr(self, spec.attr) == getattr(base, spec.attr))
            for name, spec in TOPIC_CONFIG_DEFAULTS.items()
        ]  # fmt: skip


# --- the table ------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class ConfigSpec:
    """How one topic config parses, validates and prints; `kind` is Kafka's ConfigDef type."""

    attr: str
    kind: str  # "int" | "long" | "string" | "list" | "boolean" | "double"
    check: Callable[[Any], bool]
    rule: str
    default: Any

    def parse(self, name: str, raw: str) -> Any:
        text = str(raw).strip()
        try:
            if self.kind in ("int", "long"):
                value: Any = int(text)
                lo, hi = (-(2**31), INT_MAX) if self.kind == "int" else (-(2**63), LONG_MAX)
                if not lo <= value <= hi:
                    raise ValueError(f"out of {self.kind} range")
            elif self.kind == "double":
                value = float(text)
            elif self.kind == "boolean":
                if text.lower() not in ("true", "false"):
                    raise ValueError("expected true or false")
                value = text.lower() == "true"
            elif self.kind == "list":
                value = ",".join(p.strip() for p in text.split(",") if p.strip())
            else:
                value = text
        except ValueError as exc:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"invalid value {raw!r} for {name}: {exc}"
            ) from exc
        if not self.check(value):
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"invalid value {raw!r} for {name}: must be {self.rule}"
            )
        return value

    def render(self, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)


def _at_least(n: int) -> Callable[[Any], bool]:
    return lambda v: v >= n


def _one_of(*choices: str) -> Callable[[Any], bool]:
    return lambda v: v in choices


def _policy(v: str) -> bool:
    # Kafka 3.9's ValidList: every item known; an empty list is valid (neither deleted by
    # retention nor compacted) and so are repeated items.
    return all(p in ("delete", "compact") for p in v.split(",") if p)


# Kafka 3.9's MetadataVersion strings: each release and its internal versions (-IV0 ..)
_FEATURE_RELEASES = {
    "0.8.0": -1, "0.8.1": -1, "0.8.2": -1, "0.9.0": -1, "0.10.0": 1, "0.10.1": 2, "0.10.2": 0,
    "0.11.0": 2, "1.0": 0, "1.1": 0, "2.0": 1, "2.1": 2, "2.2": 1, "2.3": 1, "2.4": 1, "2.5": 0,
    "2.6": 0, "2.7": 2, "2.8": 1, "3.0": 1, "3.1": 0, "3.2": 0, "3.3": 3, "3.4": 0, "3.5": 2,
    "3.6": 2, "3.7": 4, "3.8": 0, "3.9": 0,
}


def _format_version(v: str) -> bool:
    """A version string Kafka 3.9's MetadataVersion.fromVersionString takes: a release, 0.x ones
    with three parts and the others with two, any further parts ignored ("0.10.0.0", "3.0.1"),
    or a release with one of its internal versions ("2.8-IV1")."""
    parts = v.split(".")
    kept = 3 if v.startswith("0.") else 2
    key = v if kept >= len(parts) else ".".join(parts[:kept])
    release, _, internal = key.partition("-IV")
    if release not in _FEATURE_RELEASES:
        return False
    if not _:
        return True
    return internal.isdigit() and int(internal) <= _FEATURE_RELEASES[release]


def _throttled_replicas(v: str) -> bool:
    items = [p for p in v.split(",") if p]
    return items == ["*"] or all(re.fullmatch(r"\d+:\d+", p) for p in items)


_D = LogConfig()


def _spec(attr: str, kind: str, check: Callable[[Any], bool], rule: str) -> ConfigSpec:
    return ConfigSpec(attr, kind, check, rule, getattr(_D, attr))


# Kafka name -> spec; minimums are Kafka's (LogConfig.java / TopicConfig).
TOPIC_CONFIG_DEFAULTS: dict[str, ConfigSpec] = {
    "segment.bytes": _spec("segment_bytes", "int", _at_least(14), ">= 14"),
    "segment.ms": _spec("segment_ms", "long", _at_least(1), ">= 1"),
    "segment.index.bytes": _spec("segment_index_bytes", "int", _at_least(4), ">= 4"),
    "index.interval.bytes": _spec("index_interval_bytes", "int", _at_least(0), ">= 0"),
    "retention.bytes": _spec("retention_bytes", "long", lambda v: True, "a long"),
    "retention.ms": _spec("retention_ms", "long", _at_least(-1), ">= -1"),
    "max.message.bytes": _spec("max_message_bytes", "int", _at_least(0), ">= 0"),
    "message.timestamp.type": _spec(
        "message_timestamp_type",
        "string",
        _one_of(CREATE_TIME, LOG_APPEND_TIME),
        f"{CREATE_TIME} or {LOG_APPEND_TIME}",
    ),
    "cleanup.policy": _spec("cleanup_policy", "list", _policy, "a list of delete, compact"),
    "min.insync.replicas": _spec("min_insync_replicas", "int", _at_least(1), ">= 1"),
    "file.delete.delay.ms": _spec("file_delete_delay_ms", "long", _at_least(0), ">= 0"),
    "flush.messages": _spec("flush_messages", "long", _at_least(1), ">= 1"),
    "flush.ms": _spec("flush_ms", "long", _at_least(0), ">= 0"),
    "compression.type": _spec(
        "compression_type",
        "string",
        _one_of(*_COMPRESSION_TYPES),
        "one of " + ", ".join(_COMPRESSION_TYPES),
    ),
    "delete.retention.ms": _spec("delete_retention_ms", "long", _at_least(0), ">= 0"),
    "min.compaction.lag.ms": _spec("min_compaction_lag_ms", "long", _at_least(0), ">= 0"),
    "max.compaction.lag.ms": _spec("max_compaction_lag_ms", "long", _at_least(1), ">= 1"),
    "min.cleanable.dirty.ratio": _spec(
        "min_cleanable_dirty_ratio", "double", lambda v: 0.0 <= v <= 1.0, "in [0, 1]"
    ),
    "segment.jitter.ms": _spec("segment_jitter_ms", "long", _at_least(0), ">= 0"),
    "preallocate": _spec("preallocate", "boolean", lambda v: True, "a boolean"),
    "unclean.leader.election.enable": _spec(
        "unclean_leader_election_enable", "boolean", lambda v: True, "a boolean"
    ),
    "message.timestamp.difference.max.ms": _spec(
        "message_timestamp_difference_max_ms", "long", _at_least(0), ">= 0"
    ),
    "message.timestamp.before.max.ms": _spec(
        "message_timestamp_before_max_ms", "long", _at_least(0), ">= 0"
    ),
    "message.timestamp.after.max.ms": _spec(
        "message_timestamp_after_max_ms", "long", _at_least(0), ">= 0"
    ),
    "compression.gzip.level": _spec(
        "compression_gzip_level", "int", lambda v: v == -1 or 1 <= v <= 9, "-1 or in [1, 9]"
    ),
    "compression.lz4.level": _spec("compression_lz4_level", "int", lambda v: 1 <= v <= 17, "in [1, 17]"),
    "compression.zstd.level": _spec(
        "compression_zstd_level", "int", lambda v: -131072 <= v <= 22, "in [-131072, 22]"
    ),
    "message.format.version": _spec(
        "message_format_version", "string", _format_version, "a Kafka version from 0.8.0 to 3.9"
    ),
    "message.downconversion.enable": _spec(
        "message_downconversion_enable", "boolean", lambda v: True, "a boolean"
    ),
    "leader.replication.throttled.replicas": _spec(
        "leader_replication_throttled_replicas", "list", _throttled_replicas,
        "the literal '*' or a list of [partitionId]:[brokerId]",
    ),
    "follower.replication.throttled.replicas": _spec(
        "follower_replication_throttled_replicas", "list", _throttled_replicas,
        "the literal '*' or a list of [partitionId]:[brokerId]",
    ),
    "remote.storage.enable": _spec("remote_storage_enable", "boolean", lambda v: True, "a boolean"),
    "local.retention.ms": _spec("local_retention_ms", "long", _at_least(-2), ">= -2"),
    "local.retention.bytes": _spec("local_retention_bytes", "long", _at_least(-2), ">= -2"),
    "remote.log.copy.disable": _spec("remote_log_copy_disable", "boolean", lambda v: True, "a boolean"),
    "remote.log.delete.on.disable": _spec(
        "remote_log_delete_on_disable", "boolean", lambda v: True, "a boolean"
    ),
}
