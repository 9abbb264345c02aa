"""Topic administration: create, auto-create, delete, and the configs DescribeConfigs reports.

Validation follows Kafka's order and error codes so admin clients see what they would from Kafka.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from broker.config import PROPERTIES, TOPIC_DEFAULT_FROM_BROKER, BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.topic_registry import TopicMetadata, TopicRegistry, validate_topic_name
from protocol.errors import ErrorCode, KafkaError
from storage.log_config import LogConfig

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


class AdminManager:
    def __init__(
        self, config: BrokerConfig, registry: TopicRegistry, replica_manager: ReplicaManager
    ) -> None:
        self.config = config
        self.registry = registry
        self.replica_manager = replica_manager
        self.num_brokers = 1

    def log_config(self, topic: TopicMetadata) -> LogConfig:
        return LogConfig.from_properties(topic.configs, defaults=self.config.log_config())

    def load(self) -> None:
        """Become leader of every partition the registry knows (start-up)."""
        for topic in self.registry.topics.values():
            log_config = self.log_config(topic)
            for index in range(topic.num_partitions):
                self.replica_manager.make_leader(topic.name, index, log_config)

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicMetadata:
        validate_topic_name(name)
        if self.registry.get(name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists")
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
        if replication_factor < 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be at least 1"
            )
        if replication_factor > self.num_brokers:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor: {replication_factor} larger than available brokers: "
                f"{self.num_brokers}",
            )
        overrides = {k: v for k, v in (configs or {}).items() if v is not None}
        topic = TopicMetadata(name, uuid.uuid4(), num_partitions, replication_factor, overrides)
        log_config = self.log_config(topic)  # raises INVALID_CONFIG
        if validate_only:
            return topic
        self.registry.add(topic)
        for index in range(num_partitions):
            self.replica_manager.make_leader(name, index, log_config)
        return topic

    def auto_create_topic(self, name: str) -> TopicMetadata:
        return self.create_topic(name)

    def delete_topic(self, name: str) -> TopicMetadata:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED)
        if self.registry.get(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        topic = self.registry.remove(name)
        self.replica_manager.delete_partitions(name)
        return topic

    # -- DescribeConfigs --------------------------------------------------------------------

    def topic_configs(self, name: str) -> list[ConfigEntry]:
        topic = self.registry.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        explicit_broker = {
            topic_name
            for broker_name, topic_name in TOPIC_DEFAULT_FROM_BROKER.items()
            if broker_name in self.config.explicit
        }
        entries = []
        for prop, value in sorted(self.log_config(topic).to_properties().items()):
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

