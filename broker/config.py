"""Broker configuration under Kafka's own property names.

Precedence, lowest first: built-in defaults, a Kafka-style properties file, environment variables
`KAFKA_SIM_<NAME>` (dots become underscores: `KAFKA_SIM_NUM_PARTITIONS=3`), then `--override`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage.log_config import LogConfig

ENV_PREFIX = "KAFKA_SIM_"


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _at_least_one(value: str) -> int:
    """A count or span that must be 1 or more (Kafka's ConfigDef.Range.atLeast(1))."""
    number = int(value)
    if number < 1:
        raise ValueError(f"must be at least 1, got {number}")
    return number


def _ip_counts(value: str) -> dict[str, int]:
    """`ip:count[,ip:count...]` (Kafka's max.connections.per.ip.overrides); IPv6 as `[::1]:5`."""
    out: dict[str, int] = {}
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host:
            raise ValueError(f"expected ip:count, got {entry!r}")
        out[host.strip("[]")] = int(count)
    return out


# Kafka's feature flags this broker can finalize, with the levels it supports (Kafka 4 names):
# group.version 1 is the KIP-848 consumer group protocol, share.version 1 KIP-932 share groups;
# transaction.version 1 writes `__transaction_state` values in their flexible version, 2 is
# transactions v2 (KIP-890 part 2: the epoch bumped by every EndTxn, partitions added by Produce).
# metadata.version is a stand-in here (no KRaft metadata log): 21 is 3.9-IV0, 25 4.0-IV3; at 0 it
# is not finalized, as on a ZooKeeper-mode broker.
SUPPORTED_FEATURES = {"group.version": (0, 1), "metadata.version": (1, 25),
                      "share.version": (0, 1), "transaction.version": (0, 2)}
DEFAULT_FEATURE_LEVELS = {"group.version": 1, "metadata.version": 25, "share.version": 1,
                          "transaction.version": 2}


def _feature_levels(value: str) -> dict[str, int]:
    levels = dict.fromkeys(SUPPORTED_FEATURES, 0) | DEFAULT_FEATURE_LEVELS
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        name, sep, level = entry.partition("=")
        if not sep or name.strip() not in SUPPORTED_FEATURES:
            raise ValueError(f"expected feature=level with a feature among "
                             f"{', '.join(SUPPORTED_FEATURES)}; got {entry!r}")
        high = SUPPORTED_FEATURES[name.strip()][1]
        if not level.strip().isdigit() or not 0 <= int(level) <= high:  # (0: not finalized)
            raise ValueError(f"{name.strip()} goes from 0 to {high} here; got {level!r}")
        levels[name.strip()] = int(level)
    return levels


def _migration_policy(value: str) -> str:
    if value.lower() not in ("disabled", "upgrade", "downgrade", "bidirectional"):
        raise ValueError(f"expected disabled, upgrade, downgrade or bidirectional; got {value!r}")
    return value.lower()


def _defect(value: str) -> str:
    if value not in ("", "high-watermark-ignores-isr"):
        raise ValueError(f"expected empty or high-watermark-ignores-isr; got {value!r}")
    return value


def _assignors(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("uniform", "range")]
    if not names or unknown:
        raise ValueError(f"expected assignors among uniform, range; got {value!r}")
    return names


@dataclass(frozen=True, slots=True)
class Property:
    """One broker property: its Kafka name, parser, default and a line of documentation."""

    name: str
    parse: Callable[[str], Any]
    default: str
    doc: str
    sensitive: bool = False  # a secret: DescribeConfigs answers null, as for Kafka's PASSWORD type


# The table is the single source for parsing, `DescribeConfigs` on the broker resource and the
# README's configuration table.
PROPERTIES: tuple[Property, ...] = (
    Property("broker.id", int, "0", "id of this broker in Metadata responses"),
    Property("listeners", str, "PLAINTEXT://127.0.0.1:9092",
             "NAME://host:port[,...] to listen on; port 0 picks a free port"),
    Property("advertised.listeners", str, "",
             "NAME://host:port[,...] given to clients of that listener (default: the bound one)"),
    Property("listener.security.protocol.map", str,
             "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
             "NAME:PROTOCOL[,...] for every listener name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"),
    Property("inter.broker.listener.name", str, "",
             "listener other brokers reach this one on (default: the first listener)"),
    Property("ssl.keystore.type", str, "PEM", "format of the key store (PEM only)"),
    Property("ssl.keystore.location", str, "",
             "PEM file with the listener's private key and certificate chain"),
    Property("ssl.keystore.certificate.chain", str, "",
             "the certificate chain in PEM, instead of a keystore file", sensitive=True),
    Property("ssl.keystore.key", str, "", "the private key in PEM, instead of a keystore file",
             sensitive=True),
    Property("ssl.key.password", str, "", "password of an encrypted private key", sensitive=True),
    Property("ssl.truststore.type", str, "PEM", "format of the trust store (PEM only)"),
    Property("ssl.truststore.location", str, "",
             "PEM file of the CA certificates that client (and broker) certificates are checked against"),
    Property("ssl.truststore.certificates", str, "",
             "the trusted CA certificates in PEM, instead of a truststore file", sensitive=True),
    Property("ssl.client.auth", str, "none",
             "none, requested or required: whether clients of SSL listeners present a certificate"),
    Property("ssl.endpoint.identification.algorithm", str, "https",
             "https: a broker checks the host name in the certificate of the broker it connects to; "
             "empty: it does not"),
    Property("sasl.enabled.mechanisms", str, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
             "SASL mechanisms SASL listeners accept (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
    Property("sasl.mechanism.inter.broker.protocol", str, "PLAIN",
             "SASL mechanism brokers use with each other on a SASL inter-broker listener"),
    Property("sasl.server.max.receive.size", int, "524288",
             "largest request a client may send before it is authenticated"),
    Property("connection.failed.authentication.delay.ms", int, "100",
             "a failed authentication is answered (and the connection closed) after this delay"),
    Property("connections.max.reauth.ms", int, "0",
             "SASL sessions last this long, then the client must re-authenticate (0: forever)"),
    Property("log.dirs", str, "./data",
             "comma-separated log directories; new partitions go to the one holding the fewest "
             "(embedded: one broker-<id> folder per broker in each)"),
    Property("cluster.id", str, "", "cluster id; generated once and kept in meta.properties"),
    Property("num.partitions", int, "1", "partitions of an auto-created topic"),
    Property("default.replication.factor", int, "1", "replication factor of new topics"),
    Property("auto.create.topics.enable", _bool, "true",
             "create a topic when Metadata asks for one that does not exist"),
    Property("delete.topic.enable", _bool, "true", "allow DeleteTopics"),
    Property("message.max.bytes", int, "1048588", "largest record batch a producer may send"),
    Property("socket.request.max.bytes", int, "104857600", "largest request frame accepted"),
    Property("queued.max.request.bytes", int, "104857600",
             "bytes of large requests being read or handled at once over all connections; a "
             "connection with a large request waits to read it while they are spent (one request "
             "always fits; -1: unbounded, Kafka's default)"),
    Property("connections.max.idle.ms", int, "600000",
             "a connection that completes no request (or reads no response) for this long is closed"),
    Property("max.connections", int, "2147483647",
             "client connections the broker keeps over all listeners; one more is closed at once"),
    Property("max.connections.per.ip", int, "2147483647",
             "connections kept from one IP address; one more is closed at once"),
    Property("max.connections.per.ip.overrides", _ip_counts, "",
             "ip:count[,...] limits that replace max.connections.per.ip for those addresses"),
    Property("log.segment.bytes", int, "1073741824", "segment size at which the log rolls"),
    Property("log.roll.ms", int, "604800000", "segment age at which the log rolls"),
    Property("log.index.interval.bytes", int, "4096", "bytes between two offset index entries"),
    Property("log.retention.bytes", int, "-1", "partition size above which old segments go"),
    Property("log.retention.ms", int, "604800000", "age after which old segments go"),
    Property("log.retention.check.interval.ms", int, "300000", "how often retention runs"),
    Property("log.cleaner.enable", _bool, "true",
             "compact logs of topics with cleanup.policy=compact"),
    Property("log.cleaner.backoff.ms", int, "15000", "how often the log cleaner looks for dirty logs"),
    Property("log.flush.interval.ms", int, "9223372036854775807",
             "fsync logs this often (Kafka's default: never; the OS and replication keep data)"),
    Property("log.segment.open.files.max", int, "256",
             "segment files a broker keeps open at once (least recently used closed first)"),
    Property("replica.high.watermark.checkpoint.interval.ms", int, "5000",
             "how often high watermarks, recovery points and log start offsets are checkpointed"),
    Property("log.message.timestamp.type", str, "CreateTime", "CreateTime or LogAppendTime"),
    Property("min.insync.replicas", int, "1", "replicas that must have a write for acks=all"),
    Property("fetch.max.bytes", int, "57671680", "largest Fetch response the broker builds"),
    Property("replica.lag.time.max.ms", int, "30000",
             "a follower not caught up for this long leaves the ISR"),
    Property("replica.fetch.wait.max.ms", int, "500", "longest a follower fetch waits for data"),
    Property("replica.fetch.max.bytes", int, "1048576", "bytes a follower fetches per partition"),
    Property("max.incremental.fetch.session.cache.slots", int, "1000",
             "fetch sessions (KIP-227) a broker keeps at once; a full cache evicts as Kafka does"),
    Property("quota.window.num", _at_least_one, "11",
             "samples a client quota's rate is measured over (10 whole windows and the current)"),
    Property("quota.window.size.seconds", _at_least_one, "1",
             "the span of one client quota sample"),
    Property("producer.id.expiration.ms", int, "86400000",
             "a partition forgets an idempotent producer idle this long"),
    Property("producer.id.expiration.check.interval.ms", int, "600000",
             "how often idle producer ids are looked for"),
    Property("auto.leader.rebalance.enable", _bool, "true",
             "move leadership back to preferred replicas when a broker leads too few of its own"),
    Property("leader.imbalance.check.interval.seconds", int, "300",
             "how often the controller checks the leader balance"),
    Property("leader.imbalance.per.broker.percentage", int, "10",
             "share of a broker's preferred partitions led elsewhere that triggers a rebalance"),
    Property("unclean.leader.election.enable", _bool, "false",
             "elect a replica outside the ISR when no ISR member is alive (may lose data)"),
    Property("offsets.topic.num.partitions", int, "50",
             "partitions of __consumer_offsets (fixed once the topic exists)"),
    Property("offsets.topic.replication.factor", int, "3",
             "replication factor of __consumer_offsets (capped at the live brokers)"),
    Property("offsets.commit.timeout.ms", int, "5000",
             "how long an offset commit waits for the ISR of its offsets partition"),
    Property("share.coordinator.state.topic.num.partitions", int, "50",
             "partitions of __share_group_state (fixed once the topic exists)"),
    Property("share.coordinator.state.topic.replication.factor", int, "3",
             "replication factor of __share_group_state (capped at the live brokers)"),
    Property("share.coordinator.state.topic.min.isr", int, "2",
             "min.insync.replicas of __share_group_state (capped at its replication factor)"),
    Property("share.coordinator.write.timeout.ms", int, "5000",
             "how long a share partition's state write waits for the ISR of its partition"),
    Property("offsets.retention.minutes", int, "10080",
             "committed offsets of a group that has been empty this long are deleted"),
    Property("offsets.retention.check.interval.ms", int, "600000",
             "how often expired offsets are looked for"),
    Property("offset.metadata.max.bytes", int, "4096", "largest metadata string of a commit"),
    Property("transaction.state.log.num.partitions", int, "50",
             "partitions of __transaction_state (fixed once the topic exists)"),
    Property("transaction.state.log.replication.factor", int, "3",
             "replication factor of __transaction_state (capped at the live brokers)"),
    Property("transaction.state.log.min.isr", int, "2",
             "min.insync.replicas of __transaction_state (capped at its replication factor)"),
    Property("transaction.state.log.segment.bytes", int, "104857600",
             "segment size of __transaction_state"),
    Property("transaction.max.timeout.ms", int, "900000",
             "largest transaction.timeout.ms a producer may ask (INVALID_TRANSACTION_TIMEOUT beyond)"),
    Property("transaction.partition.verification.enable", _bool, "true",
             "a partition leader asks the coordinator before a transaction's first write to it "
             "(KIP-890; INVALID_TXN_STATE if it is not in the producer's open transaction)"),
    Property("transactional.id.expiration.ms", int, "604800000",
             "a transactional id idle this long (no transaction open) is removed"),
    Property("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, "10000",
             "how often transactions past their timeout are looked for and aborted"),
    Property("transaction.remove.expired.transaction.cleanup.interval.ms", int, "3600000",
             "how often expired transactional ids are looked for"),
    Property("group.initial.rebalance.delay.ms", int, "3000",
             "how long the first rebalance of an empty group waits for more members"),
    Property("group.min.session.timeout.ms", int, "6000", "smallest session timeout a member may ask"),
    Property("group.max.session.timeout.ms", int, "1800000",
             "largest session timeout a member may ask"),
    Property("group.consumer.session.timeout.ms", int, "45000",
             "a KIP-848 consumer group member silent this long is removed from its group"),
    Property("group.consumer.heartbeat.interval.ms", int, "5000",
             "how often KIP-848 consumer group members are told to heartbeat"),
    Property("feature.levels", _feature_levels,
             "group.version=1,metadata.version=25,share.version=1,transaction.version=2",
             "finalized feature levels (Kafka 4's features; 0 leaves one out): group.version=0 "
             "answers as a ZooKeeper-mode Kafka 3.9, without KIP-848 consumer groups; "
             "share.version=0 without KIP-932 share groups; transaction.version=0 without "
             "transactions v2; metadata.version (a stand-in: 21 is 3.9-IV0, 25 4.0-IV3) is only "
             "reported"),
    Property("group.share.session.timeout.ms", int, "45000",
             "a share group member silent this long is removed from its group"),
    Property("group.share.heartbeat.interval.ms", int, "5000",
             "how often share group members are told to heartbeat"),
    Property("group.share.max.size", int, "200", "most members a share group may have"),
    Property("group.share.record.lock.duration.ms", int, "30000",
             "how long a share consumer holds the records it acquired before they are "
             "available to others again (the acquisition lock, a timer task)"),
    Property("group.share.delivery.count.limit", int, "5",
             "deliveries of a record to share consumers before it is archived"),
    Property("group.share.partition.max.record.locks", int, "2000",
             "most records of one share partition acquired at a time"),
    Property("group.share.max.share.sessions", int, "2000",
             "most share sessions this broker keeps open"),
    Property("group.consumer.assignors", _assignors, "uniform,range",
             "server-side assignors of KIP-848 consumer groups (uniform, range); the first is "
             "the default"),
    Property("group.consumer.migration.policy", _migration_policy, "bidirectional",
             "whether a group changes kind while it has members (Kafka 4): upgrade (a classic "
             "group becomes a consumer group when a member joins with ConsumerGroupHeartbeat), "
             "downgrade (back when only classic members are left), bidirectional, or disabled"),
    Property("simulation.defect", _defect, "",
             "a deliberate bug, to show `kafka-sim simulate`'s checker catching it: "
             "high-watermark-ignores-isr moves a leader's high watermark to its log end offset "
             "without waiting for the ISR (acks=all then acknowledges what one crash can lose)"),
    Property("zookeeper.connect", str, "",
             "host:port[,host:port][/chroot] of ZooKeeper: one broker per process; empty: embedded"),
    Property("zookeeper.session.timeout.ms", int, "18000",
             "ZooKeeper session timeout: a broker silent this long is taken for dead"),
    Property("zookeeper.connection.timeout.ms", int, "18000",
             "how long a broker waits for ZooKeeper at start-up"),
    Property("controlled.shutdown.enable", _bool, "true",
             "a broker process asks the controller to move its leaderships before it stops"),
    Property("controlled.shutdown.max.retries", int, "3", "tries of a controlled shutdown"),
    Property("controlled.shutdown.retry.backoff.ms", int, "5000",
             "wait between two tries of a controlled shutdown"),
    Property("control.listener", str, "127.0.0.1:9644",
             "host:port of the HTTP control API (`kafka-sim ctl`); empty to turn it off"),
    Property("control.allow.remote", _bool, "false",
             "allow the control API on a non-loopback address (then control.token is required)"),
    Property("control.token", str, "",
             "bearer token every control API request must carry (`kafka-sim ctl --token`, "
             "or KAFKA_SIM_CONTROL_TOKEN); empty: none", sensitive=True),
    Property("authorizer.class.name", str, "",
             "kafka.security.authorizer.AclAuthorizer turns on ACLs; empty: every request allowed"),
    Property("super.users", str, "",
             "principals the authorizer always allows, separated by ';' (User:admin;User:ANONYMOUS)"),
    Property("allow.everyone.if.no.acl.found", _bool, "false",
             "with the authorizer on, allow a resource that has no ACL at all to everyone"),
    Property("log.level", str, "info", "kafka-sim log level (debug shows one line per request)"),
)
PROPERTY_BY_NAME: dict[str, Property] = {p.name: p for p in PROPERTIES}

# Broker property -> topic-level name, so topic defaults follow the broker's settings.
TOPIC_DEFAULT_FROM_BROKER: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.retention.ms": "retention.ms",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LISTENER_PREFIX = "listener.name."


class ConfigError(ValueError):
    """A property that is unknown or has a value that does not parse."""


@dataclass(slots=True)
class BrokerConfig:
    """Parsed broker properties; `raw` keeps the strings as given, for DescribeConfigs."""

    values: dict[str, Any]
    raw: dict[str, str]
    explicit: set[str] = field(default_factory=set)
    # Kafka's per-listener settings, `listener.name.<name>.<property>` as given (lower-case name).
    listener_props: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def data_dir(self) -> Path:
        """The first log dir: where the embedded cluster keeps its metadata store."""
        return self.log_dirs[0]

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d.strip()) for d in self.values["log.dirs"].split(",") if d.strip()] \
            or [Path(".")]

    def check_log_dir(self, log_dir: str | None) -> None:
        """ValueError unless `log_dir` (when given) is one of this broker's log.dirs."""
        if log_dir is not None and not any(
                os.path.abspath(log_dir) == os.path.abspath(d) for d in self.log_dirs):
            raise ValueError(f"{log_dir!r} is not one of the broker's log.dirs "
                             f"({', '.join(map(str, self.log_dirs))})")

    @property
    def listener(self) -> tuple[str, int]:
        """The first listener's (host, port)."""
        first = self.listeners[0]
        return first.host, first.port

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.values["listeners"])

    @property
    def advertised_listeners(self) -> dict[str, tuple[str, int]]:
        return {x.name: (x.host, x.port) for x in parse_listeners(self.values["advertised.listeners"])}

    @property
    def inter_broker_listener_name(self) -> str:
        return self.values["inter.broker.listener.name"] or self.listeners[0].name

    @property
    def security_protocols(self) -> dict[str, str]:
        """Listener name -> security protocol, from `listener.security.protocol.map`."""
        protocols = {}
        for entry in self.values["listener.security.protocol.map"].split(","):
            name, sep, protocol = entry.strip().partition(":")
            if not sep:
                raise ConfigError(f"listener.security.protocol.map entry {entry!r} is not NAME:PROTOCOL")
            protocols[name.strip().upper()] = protocol.strip().upper()
        return protocols

    def security_protocol(self, listener: str) -> str:
        return self.security_protocols[listener]

    def for_listener(self, listener: str, name: str) -> str:
        """A property as `listener` sees it: Kafka's `listener.name.<listener>.<name>` override, or
        the broker-wide value (raw strings: the ssl.* and sasl.* settings are all text)."""
        override = self.listener_props.get(f"{LISTENER_PREFIX}{listener.lower()}.{name}")
        if override is not None:
            return override
        return self.raw.get(name, "")

    def validate_listeners(self) -> None:
        """Kafka's start-up checks on listeners, as one-line ConfigErrors."""
        names = [x.name for x in self.listeners]
        if not names:
            raise ConfigError("listeners is empty")
        protocols = self.security_protocols
        for name in names:
            if name not in protocols:
                raise ConfigError(f"listener {name} has no security protocol: add {name}:PLAINTEXT "
                                  "to listener.security.protocol.map")
            if protocols[name] not in SECURITY_PROTOCOLS:
                raise ConfigError(f"listener {name}: unknown security protocol {protocols[name]} "
                                  f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        unknown = set(self.advertised_listeners) - set(names)
        if unknown:
            raise ConfigError(f"advertised.listeners names {', '.join(sorted(unknown))}, "
                              "which listeners does not have")
        if self.inter_broker_listener_name not in names:
            raise ConfigError(f"inter.broker.listener.name {self.inter_broker_listener_name} is not "
                              "one of the listeners")

    def log_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """A topic's LogConfig: its overrides (topic config names) over the defaults that the
        broker's `log.*` properties give. A bad override raises KafkaError INVALID_CONFIG."""
        defaults = LogConfig.from_properties(
            {topic: self.raw[broker] for broker, topic in TOPIC_DEFAULT_FROM_BROKER.items()}
        )
        return LogConfig.from_properties(overrides, defaults=defaults) if overrides else defaults

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        return build_config({**{k: self.raw[k] for k in self.explicit}, **self.listener_props,
                             **overrides})


@dataclass(frozen=True, slots=True)
class Listener:
    """One `NAME://host:port` entry of `listeners` or `advertised.listeners`."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_listeners(text: str) -> list[Listener]:
    """`NAME://host:port,...` (a bare `host:port` is PLAINTEXT); names are unique, upper case."""
    out: list[Listener] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, _ = item.partition("://")
        host, port = parse_listener(item)
        listener = Listener(name.upper() if sep else "PLAINTEXT", host, port)
        if any(x.name == listener.name for x in out):
            raise ConfigError(f"listener name {listener.name} appears twice in {text!r}")
        out.append(listener)
    return out


def parse_listener(listener: str) -> tuple[str, int]:
    """`PLAINTEXT://host:port` (or `host:port`) -> (host, port)."""
    address = listener.split(",")[0].strip()
    if "://" in address:
        address = address.split("://", 1)[1]
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ConfigError(f"listener {listener!r} has no port")
    return host.strip("[]") or "127.0.0.1", int(port)


def read_properties_file(path: Path) -> dict[str, str]:
    """A Java-style properties file: `name=value` lines, `#` and `!` comments."""
    props: dict[str, str] = {}
    for raw_line in path.read_text().splitlines():
        line = raw_line.strip()
        if not line or line[0] in "#!":
            continue
        name, sep, value = line.partition("=")
        if not sep:
            name, _, value = line.partition(":")
        props[name.strip()] = value.strip()
    return props


def env_properties(environ: Mapping[str, str]) -> dict[str, str]:
    by_env = {ENV_PREFIX + p.name.upper().replace(".", "_"): p.name for p in PROPERTIES}
    return {by_env[k]: v for k, v in environ.items() if k in by_env}


def build_config(
    overrides: Mapping[str, str] | None = None,
    *,
    properties_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Merge defaults, file, environment and overrides, and parse every value."""
    layers: list[Mapping[str, str]] = []
    if properties_file is not None:
        layers.append(read_properties_file(properties_file))
    layers.append(env_properties(os.environ if environ is None else environ))
    layers.append(overrides or {})
    raw = {p.name: p.default for p in PROPERTIES}
    explicit: set[str] = set()
    listener_props: dict[str, str] = {}
    for layer in layers:
        for name, value in layer.items():
            if name.startswith(LISTENER_PREFIX):
                listener_props[_listener_property(name)] = value
                continue
            if name not in PROPERTY_BY_NAME:
                raise ConfigError(f"unknown property {name!r}")
            raw[name] = value
            explicit.add(name)
    values: dict[str, Any] = {}
    for prop in PROPERTIES:
        try:
            values[prop.name] = prop.parse(raw[prop.name])
        except ValueError as exc:
            raise ConfigError(f"{prop.name}={raw[prop.name]!r}: {exc}") from None
    config = BrokerConfig(values=values, raw=raw, explicit=explicit, listener_props=listener_props)
    config.validate_listeners()
    return config


def _listener_property(name: str) -> str:
    """Check a `listener.name.<listener>.<property>` key: the property is one of the ssl.* and
    sasl.* settings, or `<mechanism>.sasl.jaas.config`. Returns it with the listener lower-cased."""
    listener, _, prop = name[len(LISTENER_PREFIX):].partition(".")
    mechanism, _, rest = prop.partition(".")
    per_listener = prop in PROPERTY_BY_NAME and prop.startswith(("ssl.", "sasl.", "connections.max.reauth"))
    if not listener or not (per_listener or rest == "sasl.jaas.config"):
        raise ConfigError(f"unknown property {name!r} (listener.name.<listener>. takes an ssl.* or "
                          "sasl.* property, or <mechanism>.sasl.jaas.config)")
    if rest == "sasl.jaas.config":
        prop = f"{mechanism.lower()}.sasl.jaas.config"
    return f"{LISTENER_PREFIX}{listener.lower()}.{prop}"


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """`name=value` strings from the command line."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--override expects name=value, got {pair!r}")
        out[name.strip()] = value.strip()
    return out
