"""DescribeConfigs entries as a ZooKeeper-mode Kafka 3.9 broker builds them (Kafka's ConfigHelper):
each config's type, source, read-only flag and synonyms, from the tables of Kafka's names below."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.config import PROPERTIES, PROPERTY_BY_NAME, BrokerConfig, Property
from broker.metadata import group_configs
from broker.metadata.dynamic_broker_configs import (
    DYNAMIC,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    DynamicBrokerConfigs,
    topic_defaults,
)
from storage.log_config import TOPIC_CONFIG_DEFAULTS

# Config sources (Kafka's DescribeConfigsResponse.ConfigSource ids).
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8  # Kafka 4's GROUP_CONFIG

# Config types (Kafka's DescribeConfigsResponse.ConfigType ids).
TYPE_UNKNOWN, TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT = 0, 1, 2, 3, 4
TYPE_LONG, TYPE_DOUBLE, TYPE_LIST, TYPE_CLASS, TYPE_PASSWORD = 5, 6, 7, 8, 9

_TOPIC_KINDS = {"boolean": TYPE_BOOLEAN, "string": TYPE_STRING, "int": TYPE_INT, "long": TYPE_LONG,
                "double": TYPE_DOUBLE, "list": TYPE_LIST}

# Kafka's ConfigDef type of the broker properties kafka-sim has, where the name alone or its
# parser does not tell (a str parser means STRING, int INT, a boolean parser BOOLEAN).
_BROKER_TYPES = {
    "ssl.keystore.certificate.chain": TYPE_PASSWORD, "ssl.keystore.key": TYPE_PASSWORD,
    "ssl.key.password": TYPE_PASSWORD, "ssl.truststore.certificates": TYPE_PASSWORD,
    "control.token": TYPE_PASSWORD,
    "sasl.enabled.mechanisms": TYPE_LIST,
    "offsets.topic.replication.factor": TYPE_SHORT,
    "transaction.state.log.replication.factor": TYPE_SHORT,
    **dict.fromkeys((
        "connections.max.reauth.ms", "connections.max.idle.ms", "log.roll.ms", "log.retention.bytes",
        "log.retention.ms", "log.retention.check.interval.ms", "log.cleaner.backoff.ms",
        "log.flush.interval.ms", "replica.high.watermark.checkpoint.interval.ms",
        "replica.lag.time.max.ms", "leader.imbalance.check.interval.seconds",
        "offsets.retention.check.interval.ms", "controlled.shutdown.retry.backoff.ms",
    ), TYPE_LONG),
}

# Kafka configs whose default is null: unset, Kafka describes them with a null value and no
# DEFAULT_CONFIG synonym (log.retention.ms, say, then comes from log.retention.hours).
_NULL_DEFAULTS = frozenset((
    "advertised.listeners", "inter.broker.listener.name", "ssl.keystore.location",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password",
    "ssl.truststore.location", "ssl.truststore.certificates", "log.dirs", "log.roll.ms",
    "log.roll.jitter.ms", "log.retention.ms", "log.retention.minutes", "log.flush.interval.ms",
    "zookeeper.connect", "zookeeper.connection.timeout.ms",
))

# Configs a broker can change at runtime (dynamic_broker_configs.DYNAMIC, Kafka's
# DynamicBrokerConfig.AllDynamicConfigs) are described as not read-only; every other one is.
# Authorizer properties are not KafkaConfig definitions: Kafka describes them only when set, of
# unknown type and therefore sensitive (KafkaConfig.maybeSensitive).
_UNDEFINED_IN_KAFKA = frozenset(("super.users", "allow.everyone.if.no.acl.found"))

# Topic config -> its broker synonyms, the first being the one that counts (Kafka's
# ServerTopicConfigSynonyms with DynamicBrokerConfig.brokerConfigSynonyms of that first name).
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "cleanup.policy": ("log.cleanup.policy",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "preallocate": ("log.preallocate",),
    "message.format.version": ("log.message.format.version",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
    "local.retention.ms": ("log.local.retention.ms",),
    "local.retention.bytes": ("log.local.retention.bytes",),
}

_LONG_MAX = str(2**63 - 1)
# Kafka's defaults of the broker synonyms kafka-sim has no property for.
_SYNONYM_DEFAULTS = {
    "log.roll.hours": "168", "log.roll.jitter.hours": "0", "log.index.size.max.bytes": "10485760",
    "log.flush.interval.messages": _LONG_MAX, "log.flush.scheduler.interval.ms": _LONG_MAX,
    "log.retention.hours": "168", "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.compaction.lag.ms": "0", "log.cleaner.max.compaction.lag.ms": _LONG_MAX,
    "log.segment.delete.delay.ms": "60000", "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleanup.policy": "delete", "compression.type": "producer",
    "compression.gzip.level": "-1", "compression.lz4.level": "9", "compression.zstd.level": "3",
    "log.preallocate": "false", "log.message.format.version": "3.0-IV1",
    "log.message.timestamp.difference.max.ms": _LONG_MAX,
    "log.message.timestamp.before.max.ms": _LONG_MAX,
    "log.message.timestamp.after.max.ms": _LONG_MAX,
    "log.message.downconversion.enable": "true", "log.local.retention.ms": "-2",
    "log.local.retention.bytes": "-2",
}
_BROKER_SYNONYMS = {synonyms[0]: synonyms for synonyms in TOPIC_SYNONYMS.values()}


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    config_type: int = TYPE_STRING
    documentation: str | None = None
    sensitive: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)  # name, value, source

    @property
    def is_default(self) -> bool:
        return self.source == SOURCE_DEFAULT


def _broker_type(prop: Property) -> int:
    if prop.name in _BROKER_TYPES:
        return _BROKER_TYPES[prop.name]
    if prop.parse is int:
        return TYPE_INT
    if prop.parse is str:
        return TYPE_STRING
    if prop.default in ("true", "false"):
        return TYPE_BOOLEAN
    # a checking parser of numbers (quota.window.num, say): Kafka's are INTs
    return TYPE_INT if prop.default.lstrip("-").isdecimal() else TYPE_STRING


def _default_of(name: str) -> str | None:
    """Kafka's static default of a broker config (kafka-sim's, where it has the property)."""
    if name in _NULL_DEFAULTS:
        return None
    prop = PROPERTY_BY_NAME.get(name)
    return prop.default if prop is not None else _SYNONYM_DEFAULTS.get(name)


def _synonyms(config: BrokerConfig, name: str, sensitive: bool,
              dynamic: DynamicBrokerConfigs | None = None) -> list[tuple[str, str | None, int]]:
    """Kafka's ConfigHelper.configSynonyms: the broker's dynamic settings, the cluster's dynamic
    defaults, the static settings, then the defaults, of `name` and its synonyms, from the first
    mention of `name` on."""
    names = _BROKER_SYNONYMS.get(name, (name,))
    found = []
    if dynamic is not None:
        for source_map, source in ((dynamic.own, SOURCE_DYNAMIC_BROKER),
                                   (dynamic.default, SOURCE_DYNAMIC_DEFAULT_BROKER)):
            found += [(n, source_map[n], source) for n in names if n in source_map]
    found += [(n, config.raw[n], SOURCE_STATIC_BROKER) for n in names if n in config.explicit]
    found += [(n, default, SOURCE_DEFAULT) for n in names
              if (default := _default_of(n)) is not None]
    while found and found[0][0] != name:
        found.pop(0)
    return [(n, None if sensitive else v, s) for n, v, s in found]


def broker_entries(config: BrokerConfig,
                   dynamic: DynamicBrokerConfigs | None = None) -> list[ConfigEntry]:
    """Every broker config; one set dynamically shows its dynamic value (DYNAMIC_BROKER_CONFIG
    or DYNAMIC_DEFAULT_BROKER_CONFIG), and Kafka's dynamic settings kafka-sim has no property
    for are described once set."""
    entries = []
    for prop in PROPERTIES:
        explicit = prop.name in config.explicit
        if prop.name in _UNDEFINED_IN_KAFKA:
            if explicit:
                entries.append(ConfigEntry(prop.name, None, SOURCE_STATIC_BROKER, read_only=True,
                                           config_type=TYPE_UNKNOWN, documentation=prop.doc,
                                           sensitive=True,
                                           synonyms=[(prop.name, None, SOURCE_STATIC_BROKER)]))
            continue
        kind = _broker_type(prop)
        sensitive = kind == TYPE_PASSWORD
        synonyms = _synonyms(config, prop.name, sensitive, dynamic)
        value = config.raw[prop.name] if explicit or prop.name not in _NULL_DEFAULTS else None
        set_live = dynamic.lookup(prop.name) if dynamic is not None else []
        if set_live:
            value = set_live[0][0]
        entries.append(ConfigEntry(
            prop.name, None if sensitive else value,
            synonyms[0][2] if synonyms else SOURCE_DEFAULT,
            read_only=prop.name not in DYNAMIC, config_type=kind, documentation=prop.doc,
            sensitive=sensitive, synonyms=synonyms,
        ))
    for name in sorted(dynamic.values().keys() - PROPERTY_BY_NAME.keys() if dynamic else ()):
        (value, source), *_ = dynamic.lookup(name)
        entries.append(ConfigEntry(name, value, source, synonyms=[
            (name, v, s) for v, s in dynamic.lookup(name)]))
    return entries


def topic_entries(config: BrokerConfig, overrides: Mapping[str, str],
                  dynamic: DynamicBrokerConfigs | None = None) -> list[ConfigEntry]:
    """Every topic config, as Kafka's createTopicConfigEntry: an override first among the
    synonyms (TOPIC_CONFIG), then its broker synonyms (dynamic ones first); the source is the
    first synonym's."""
    defaults = topic_defaults(dynamic.values()) if dynamic is not None else {}
    entries = []
    for name, value in sorted(config.log_config({**defaults, **overrides})
                              .to_properties().items()):
        synonyms = []
        if name in overrides:
            synonyms.append((name, value, SOURCE_TOPIC))
        if name in TOPIC_SYNONYMS:
            synonyms += _synonyms(config, TOPIC_SYNONYMS[name][0], False, dynamic)
        entries.append(ConfigEntry(
            name, value, synonyms[0][2] if synonyms else SOURCE_DEFAULT,
            config_type=_TOPIC_KINDS[TOPIC_CONFIG_DEFAULTS[name].kind], synonyms=synonyms,
        ))
    return entries


def group_entries(config: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every group config: its override (GROUP_CONFIG), else its default (the broker's
    group.* setting it comes from)."""
    entries = []
    for spec in group_configs.SPECS.values():
        kind = TYPE_STRING if spec.broker_default is None else TYPE_INT
        value = overrides.get(spec.name)
        if value is not None:
            entries.append(ConfigEntry(spec.name, value, SOURCE_GROUP, config_type=kind,
                                       documentation=spec.doc,
                                       synonyms=[(spec.name, value, SOURCE_GROUP)]))
        else:
            entries.append(ConfigEntry(spec.name, group_configs.default_value(config, spec),
                                       SOURCE_DEFAULT, config_type=kind, documentation=spec.doc))
    return entries
