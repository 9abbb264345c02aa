"""The broker's durable cluster metadata: topics, their ids and config overrides, producer ids.

A single broker keeps it as one JSON file in the data directory, rewritten atomically (temp file,
fsync, rename), next to Kafka's `meta.properties`. The replication issue moves this behind a store
with ZooKeeper's semantics.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError

METADATA_FILE = "kafka-sim-metadata.json"
META_PROPERTIES = "meta.properties"
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str | None) -> None:
    """Kafka's rules: 1-249 characters of [a-zA-Z0-9._-], and not `.` or `..`."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters",
        )
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "num_partitions": self.num_partitions,
            "replication_factor": self.replication_factor,
            "configs": self.configs,
            "internal": self.internal,
        }

    @classmethod
    def from_json(cls, obj: dict) -> TopicMetadata:
        return cls(
            name=obj["name"],
            topic_id=uuid.UUID(obj["topic_id"]),
            num_partitions=obj["num_partitions"],
            replication_factor=obj.get("replication_factor", 1),
            configs=dict(obj.get("configs", {})),
            internal=obj.get("internal", False),
        )


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    # The rename is durable only once the directory entry is.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class TopicRegistry:
    """Topics by name and id, plus the next producer id; persisted on every change."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / METADATA_FILE
        self.topics: dict[str, TopicMetadata] = {}
        self.by_id: dict[uuid.UUID, TopicMetadata] = {}
        self.next_producer_id = 0
        if self._path.exists():
            state = json.loads(self._path.read_text())
            for obj in state.get("topics", []):
                topic = TopicMetadata.from_json(obj)
                self.topics[topic.name] = topic
                self.by_id[topic.topic_id] = topic
            self.next_producer_id = state.get("next_producer_id", 0)

    def _save(self) -> None:
        state = {
            "topics": [t.to_json() for t in sorted(self.topics.values(), key=lambda t: t.name)],
            "next_producer_id": self.next_producer_id,
        }
        write_atomically(self._path, json.dumps(state, indent=1, sort_keys=True))

    def get(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def add(self, topic: TopicMetadata) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic
        self._save()

    def remove(self, name: str) -> TopicMetadata:
        topic = self.topics.pop(name)
        self.by_id.pop(topic.topic_id, None)
        self._save()
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._save()

    def allocate_producer_id(self) -> int:
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        self._save()
        return producer_id


def load_or_create_cluster_id(data_dir: Path, broker_id: int, configured: str) -> str:
    """Read `cluster.id` from meta.properties, or write a new one (Kafka's file format)."""
    path = data_dir / META_PROPERTIES
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            name, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                props[name.strip()] = value.strip()
    cluster_id = props.get("cluster.id") or configured or _new_cluster_id()
    if props.get("cluster.id") != cluster_id or props.get("node.id") != str(broker_id):
        text = f"version=1\ncluster.id={cluster_id}\nnode.id={broker_id}\n"
        write_atomically(path, text)
    return cluster_id


def _new_cluster_id() -> str:
    # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
