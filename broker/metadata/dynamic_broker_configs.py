"""Dynamic broker configs (Kafka's DynamicBrokerConfig): the broker settings Kafka lets an admin
change live with AlterConfigs / IncrementalAlterConfigs on a BROKER resource, kept at
/config/brokers/<id> (one broker) and /config/brokers/<default> (every broker), read by each
broker at start and again after a change notification ("brokers/<id>", "brokers/<default>").

A broker's value of a setting: its own dynamic value, else the cluster default, else its static
one. The log settings among them (DynamicLogConfig) are the defaults of topic configs: every log
without an override of its own takes them at once.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.metadata.store import MetadataStore, MetadataStoreError, NoNodeError

BROKER_CONFIGS = "/config/brokers"
DEFAULT_ENTITY = "<default>"
ENTITY = "brokers"
SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER = 2, 3  # Kafka's ConfigSource ids

# Broker name of a topic config -> (the topic config, the factor to its unit): Kafka's
# DynamicLogConfig keys, the broker synonyms of topic configs (ms, minutes and hours variants).
LOG_CONFIG_SYNONYMS: dict[str, tuple[str, int]] = {
    "log.segment.bytes": ("segment.bytes", 1), "log.roll.ms": ("segment.ms", 1),
    "log.roll.hours": ("segment.ms", 3_600_000),
    "log.roll.jitter.ms": ("segment.jitter.ms", 1),
    "log.roll.jitter.hours": ("segment.jitter.ms", 3_600_000),
    "log.index.size.max.bytes": ("segment.index.bytes", 1),
    "log.flush.interval.messages": ("flush.messages", 1),
    "log.flush.interval.ms": ("flush.ms", 1),
    "log.retention.bytes": ("retention.bytes", 1), "log.retention.ms": ("retention.ms", 1),
    "log.retention.minutes": ("retention.ms", 60_000),
    "log.retention.hours": ("retention.ms", 3_600_000),
    "message.max.bytes": ("max.message.bytes", 1),
    "log.index.interval.bytes": ("index.interval.bytes", 1),
    "log.cleaner.delete.retention.ms": ("delete.retention.ms", 1),
    "log.cleaner.min.compaction.lag.ms": ("min.compaction.lag.ms", 1),
    "log.cleaner.max.compaction.lag.ms": ("max.compaction.lag.ms", 1),
    "log.segment.delete.delay.ms": ("file.delete.delay.ms", 1),
    "log.cleaner.min.cleanable.ratio": ("min.cleanable.dirty.ratio", 1),
    "log.cleanup.policy": ("cleanup.policy", 1),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", 1),
    "min.insync.replicas": ("min.insync.replicas", 1),
    "compression.type": ("compression.type", 1),
    "compression.gzip.level": ("compression.gzip.level", 1),
    "compression.lz4.level": ("compression.lz4.level", 1),
    "compression.zstd.level": ("compression.zstd.level", 1),
    "log.preallocate": ("preallocate", 1),
    "log.message.timestamp.type": ("message.timestamp.type", 1),
    "log.message.timestamp.before.max.ms": ("message.timestamp.before.max.ms", 1),
    "log.message.timestamp.after.max.ms": ("message.timestamp.after.max.ms", 1),
    "log.message.downconversion.enable": ("message.downconversion.enable", 1),
}
# The rest of Kafka's dynamic broker configs: the thread pools, the log cleaner, connection
# limits, the replication throttles, producer state; kafka-sim keeps and describes them (it has
# no thread pools to resize).
OTHER_DYNAMIC = frozenset((
    "background.threads", "num.io.threads", "num.network.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "log.cleaner.threads",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor", "log.cleaner.backoff.ms",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "max.connection.creation.rate", "metric.reporters", "producer.id.expiration.ms",
    "transaction.partition.verification.enable", "follower.replication.throttled.rate",
    "leader.replication.throttled.rate", "replica.alter.log.dirs.io.max.bytes.per.second",
))
# Settings only one broker may be given (Kafka's PerBrokerConfigs: security and listeners).
PER_BROKER_ONLY = frozenset((
    "listeners", "advertised.listeners", "listener.security.protocol.map",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.client.auth", "ssl.endpoint.identification.algorithm",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites",
    "ssl.secure.random.implementation", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
))
DYNAMIC = frozenset(LOG_CONFIG_SYNONYMS) | OTHER_DYNAMIC | PER_BROKER_ONLY


def entity_of(broker: int | None) -> str:
    """The node name of one broker's configs, or of the cluster default (None)."""
    return DEFAULT_ENTITY if broker is None else str(broker)


def config_path(broker: int | None) -> str:
    return f"{BROKER_CONFIGS}/{entity_of(broker)}"


def notification_body(broker: int | None) -> dict:
    return {"version": 2, "entity_path": f"{ENTITY}/{entity_of(broker)}"}


def topic_defaults(values: dict[str, str]) -> dict[str, str]:
    """Dynamic log settings as topic-config defaults, a setting in ms before its minutes before
    its hours variant (Kafka's precedence)."""
    out: dict[str, str] = {}
    for name in sorted(values, key=lambda n: LOG_CONFIG_SYNONYMS.get(n, ("", 1))[1]):
        if name in LOG_CONFIG_SYNONYMS:
            topic_name, factor = LOG_CONFIG_SYNONYMS[name]
            if topic_name not in out:
                value = values[name]
                out[topic_name] = str(int(value) * factor) if factor != 1 else value
    return out


async def read_entity(store: MetadataStore, broker: int | None) -> dict[str, str]:
    try:
        data, _ = await store.get_json(config_path(broker))
    except NoNodeError:
        return {}
    return {k: str(v) for k, v in dict((data or {}).get("config", {})).items()}


class DynamicBrokerConfigs:
    """This broker's dynamic settings and the cluster defaults, as last read from the store."""

    def __init__(self, store: MetadataStore, broker_id: int,
                 on_change: Callable[[], None]) -> None:
        self._store = store
        self.broker_id = broker_id
        self._on_change = on_change
        self.own: dict[str, str] = {}
        self.default: dict[str, str] = {}

    async def load(self) -> None:
        """Read both nodes (at start; the store unreachable: kept as they were)."""
        try:
            own = await read_entity(self._store, self.broker_id)
            default = await read_entity(self._store, None)
        except MetadataStoreError:
            return
        if (own, default) != (self.own, self.default):
            self.own, self.default = own, default
            self._on_change()

    def concerns(self, entity_path: str) -> bool:
        """A change notification naming this broker's or the cluster default's configs."""
        kind, _, name = entity_path.partition("/")
        return kind == ENTITY and name in (DEFAULT_ENTITY, str(self.broker_id))

    def values(self) -> dict[str, str]:
        """The dynamic settings in force here: this broker's over the cluster default."""
        return {**self.default, **self.own}

    def lookup(self, name: str) -> list[tuple[str, int]]:
        """(value, source) of `name`: this broker's first, then the cluster default's."""
        found = []
        if name in self.own:
            found.append((self.own[name], SOURCE_DYNAMIC_BROKER))
        if name in self.default:
            found.append((self.default[name], SOURCE_DYNAMIC_DEFAULT_BROKER))
        return found
