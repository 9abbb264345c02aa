"""Topic administration: create, auto-create, delete, and the configs DescribeConfigs reports.

Creation writes the topic's replica assignment to the metadata store and (unless asked not to)
waits until the controller has elected leaders and told this broker, as Kafka's
DelayedCreatePartitions does. Validation follows Kafka's order and error codes.
"""

from __future__ import annotations

import contextlib
import uuid
import zlib
from dataclasses import dataclass

from broker.config import PROPERTIES, TOPIC_DEFAULT_FROM_BROKER, BrokerConfig
from broker.metadata import zk_paths as paths
from broker.metadata.metadata_cache import MetadataCache, TopicInfo
from broker.metadata.store import MetadataStore, NodeExistsError, NoNodeError
from broker.metadata.topic_names import validate_topic_name
from protocol.errors import ErrorCode, KafkaError

# DescribeConfigs config sources (Kafka's ConfigSource ids).
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# DescribeConfigs resource types.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# DescribeConfigs config types.
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG = 1, 2, 3, 5


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    config_type: int = TYPE_STRING
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source == SOURCE_DEFAULT


def _config_type(value: str) -> int:
    if value in ("true", "false"):
        return TYPE_BOOLEAN
    try:
        number = int(value)
    except ValueError:
        return TYPE_STRING
    return TYPE_INT if -(2**31) <= number < 2**31 else TYPE_LONG


def assign_replicas(name: str, brokers: list[int], num_partitions: int, rf: int) -> dict[int, list[int]]:
    """Round-robin from a start that depends on the topic, so leaders spread over brokers."""
    brokers = sorted(brokers)
    start = zlib.crc32(name.encode()) % len(brokers)
    return {
        p: [brokers[(start + p + j) % len(brokers)] for j in range(rf)]
        for p in range(num_partitions)
    }


class AdminManager:
    """Kafka's ZkAdminManager: topic and config changes written to the metadata store."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, cache: MetadataCache) -> None:
        self.config = config
        self.store = store
        self.cache = cache

    def live_brokers(self) -> list[int]:
        return [int(b) for b in self.store.get_children(paths.BROKER_IDS)]

    def create_topic_in_store(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
        *,
        assignment: dict[int, list[int]] | None = None,
        validate_only: bool = False,
        internal: bool = False,
    ) -> TopicInfo:
        validate_topic_name(name)
        if self.store.exists(paths.topic(name)) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        live = self.live_brokers()
        if assignment is None:
            if num_partitions == -1:
                num_partitions = self.config["num.partitions"]
            if replication_factor == -1:
                replication_factor = self.config["default.replication.factor"]
            if num_partitions < 1:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 "Number of partitions must be larger than 0.")
            if replication_factor < 1:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0.")
            if replication_factor > len(live):
                raise KafkaError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Replication factor: {replication_factor} larger than available brokers: "
                    f"{len(live)}.",
                )
            assignment = assign_replicas(name, live, num_partitions, replication_factor)
        elif any(b not in live for replicas in assignment.values() for b in replicas):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "unknown broker in assignment")
        overrides = {k: v for k, v in (configs or {}).items() if v is not None}
        self.config.log_config(overrides)  # raises INVALID_CONFIG
        topic = TopicInfo(name, uuid.uuid4(), assignment, overrides, internal)
        if validate_only:
            return topic
        self.store.create_json(paths.topic_config(name), {"version": 1, "config": overrides})
        try:
            self.store.create_json(paths.topic(name), {
                "version": 3,
                "topic_id": str(topic.topic_id),
                "partitions": {str(p): r for p, r in assignment.items()},
                **({"internal": True} if internal else {}),
            })
        except NodeExistsError:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"Topic '{name}' already exists.") from None
        return topic

    async def create_topic(self, name: str, *args, timeout_ms: int = 30_000, **kwargs) -> TopicInfo:
        topic = self.create_topic_in_store(name, *args, **kwargs)
        if (
            not kwargs.get("validate_only")
            and timeout_ms > 0
            and not await self.cache.wait_for(lambda _: self.cache.has_leaders(name), timeout_ms)
        ):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                 f"topic '{name}' was created but has no leaders yet")
        return topic

    async def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None = None, *,
        validate_only: bool = False, timeout_ms: int = 30_000,
    ) -> None:
        """Grow a topic to `count` partitions (CreatePartitions); partitions never shrink."""
        try:
            data, stat = self.store.get_json(paths.topic(name))
        except NoNodeError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None
        current = {int(p): r for p, r in data["partitions"].items()}
        if count < len(current):
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic currently has {len(current)} "
                             f"partitions, which is higher than the requested {count}.")
        if count == len(current):
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic already has {len(current)} partitions.")
        live = self.live_brokers()
        rf = len(next(iter(current.values())))
        if assignments is None:
            if rf > len(live):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {rf} larger than available brokers: {len(live)}.")
            grown = assign_replicas(name, live, count, rf)
            added = {p: grown[p] for p in range(len(current), count)}
        else:
            if len(assignments) != count - len(current):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"{len(assignments)} assignments for {count - len(current)} "
                                 "new partitions")
            for replicas in assignments:
                if len(replicas) != rf or len(set(replicas)) != rf or any(b not in live for b in replicas):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"assignment {replicas} must name {rf} distinct live brokers")
            added = {len(current) + i: list(r) for i, r in enumerate(assignments)}
        if validate_only:
            return
        data["partitions"] = {str(p): r for p, r in {**current, **added}.items()}
        self.store.set_json(paths.topic(name), data, version=stat.version)
        if timeout_ms > 0 and not await self.cache.wait_for(
            lambda s: (t := s.topics.get(name)) is not None and t.num_partitions == count
            and self.cache.has_leaders(name), timeout_ms
        ):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"topic '{name}' has {count} partitions but not all have leaders yet")

    async def delete_topic(self, name: str, timeout_ms: int = 30_000) -> TopicInfo:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED)
        topic = self.cache.topic(name)
        if topic is None or self.store.exists(paths.topic(name)) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        with contextlib.suppress(NodeExistsError):  # already being deleted
            self.store.create(paths.delete_topic(name))
        if timeout_ms > 0 and not await self.cache.wait_for(
            lambda snapshot: name not in snapshot.topics, timeout_ms
        ):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"topic '{name}' is not deleted yet")
        return topic

    # -- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------

    def topic_config_overrides(self, name: str) -> dict[str, str]:
        """A topic's overrides as the store has them (the truth; metadata caches may lag)."""
        if self.store.exists(paths.topic(name)) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            data, _ = self.store.get_json(paths.topic_config(name))
        except NoNodeError:
            return {}
        return dict((data or {}).get("config", {}))

    def alter_topic_configs(self, name: str, overrides: dict[str, str], *, validate_only: bool) -> None:
        """Replace a topic's overrides, validated as a whole. The controller watches the config node:
        it re-reads it and sends UpdateMetadata, and every broker applies the new LogConfig."""
        try:
            self.config.log_config(overrides)
        except KafkaError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource "
                             f"ConfigResource(type=TOPIC, name='{name}'): {exc.message}") from None
        if validate_only:
            return
        body = {"version": 1, "config": overrides}
        try:
            self.store.set_json(paths.topic_config(name), body)
        except NoNodeError:
            self.store.create_json(paths.topic_config(name), body)

    def alter_broker_configs(self, name: str, config_names: list[str]) -> None:
        """Broker configs are static here (all read-only in DescribeConfigs): a change is refused as
        Kafka refuses a non-dynamic one (DynamicBrokerConfig.validateConfigs), with INVALID_REQUEST."""
        if name and not (name.isdigit() and int(name) in self.cache.snapshot.brokers):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown broker '{name}'")
        if config_names:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: "
                             f"Set({', '.join(sorted(config_names))})")

    # -- DescribeConfigs --------------------------------------------------------------------

    def topic_configs(self, name: str) -> list[ConfigEntry]:
        topic = self.cache.topic(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        explicit_broker = {
            topic_name
            for broker_name, topic_name in TOPIC_DEFAULT_FROM_BROKER.items()
            if broker_name in self.config.explicit
        }
        entries = []
        for prop, value in sorted(self.config.log_config(topic.configs).to_properties().items()):
            if prop in topic.configs:
                source = SOURCE_TOPIC
            elif prop in explicit_broker:
                source = SOURCE_STATIC_BROKER
            else:
                source = SOURCE_DEFAULT
            entries.append(ConfigEntry(prop, value, source, config_type=_config_type(value)))
        return entries

    def broker_configs(self) -> list[ConfigEntry]:
        return [
            ConfigEntry(
                p.name,
                self.config.raw[p.name],
                SOURCE_STATIC_BROKER if p.name in self.config.explicit else SOURCE_DEFAULT,
                read_only=True,
                config_type=_config_type(self.config.raw[p.name]),
                documentation=p.doc,
            )
            for p in PROPERTIES
        ]
