"""Where a coordinator's key lives: the partition of its internal topic, as Kafka computes it
(Java's String.hashCode, Kafka's Utils.abs), for groups, transactional ids and share
partitions."""

from __future__ import annotations

import base64
import uuid


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: base64url without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def share_state_partition(group_id: str, topic_id: uuid.UUID, partition: int,
                          num_partitions: int) -> int:
    """The `__share_group_state` partition of a share partition: Kafka's
    SharePartitionKey "group:topicId:partition"."""
    key = f"{group_id}:{kafka_uuid(topic_id)}:{partition}"
    return kafka_abs(java_string_hash(key)) % num_partitions
