"""Consumer groups (Kafka's kafka.coordinator.group): the classic group protocol's coordinator and
the `__consumer_offsets` partitions it keeps groups and offsets in.

May import: broker.replication (appends with acks=-1, reading its partitions), broker.metadata
(the metadata cache), broker.config, storage, protocol, timer.
"""

from broker.coordinator.group.coordinator import GroupCoordinator, await_callback
from broker.metadata.topic_names import OFFSETS_TOPIC

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "await_callback"]
