"""A broker's view of the cluster, as the controller's UpdateMetadata last described it.

Metadata, CreateTopics and DescribeConfigs answer from here, so a client sees what every broker
agrees on: live brokers, the controller, topics with their ids, configs and partition states.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.metadata.partition_state import LeaderAndIsr
from broker.metadata.replica_assignment import ReplicaAssignment
from timer import FunctionTimerTask, SystemTimer


@dataclass(slots=True)
class TopicInfo:
    """A topic as the metadata cache knows it: id, assignment, configs."""
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]  # partition -> replicas, preferred leader first
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    # Partitions being reassigned (KIP-455, the topic node's fields): replicas joining, leaving.
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        return len(next(iter(self.assignment.values()), []))

    def replica_assignment(self, partition: int) -> ReplicaAssignment:
        return ReplicaAssignment(list(self.assignment.get(partition, [])),
                                 list(self.adding_replicas.get(partition, [])),
                                 list(self.removing_replicas.get(partition, [])))


@dataclass(slots=True)
class MetadataSnapshot:
    """What UpdateMetadata carries: controller, live brokers, topics, partition states."""
    controller_id: int = -1
    controller_epoch: int = 0
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    partitions: dict[tuple[str, int], LeaderAndIsr] = field(default_factory=dict)
    # Every broker's advertised address per listener name; `brokers` holds the inter-broker one.
    endpoints: dict[int, dict[str, tuple[str, int]]] = field(default_factory=dict)
    # Per partition, replicas on a failed log dir of a live broker (UpdateMetadata's offline_replicas).
    offline_replicas: dict[tuple[str, int], list[int]] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, timer: SystemTimer) -> None:
        self.snapshot = MetadataSnapshot()
        self.timer = timer  # deadlines of waits: they follow the broker's clock, as every timeout
        self._waiters: list[tuple[Callable[[MetadataSnapshot], bool], asyncio.Future]] = []
        self._names_by_id: dict[uuid.UUID, str] | None = None  # of the current snapshot, lazily
        self._names_by_metric_name: dict[str, list[str]] | None = None  # likewise

    def update(self, snapshot: MetadataSnapshot) -> None:
        """UpdateMetadata (its controller epoch already checked): replace the view, then wake
        whoever waits for a condition on it."""
        self.snapshot = snapshot
        self._names_by_id = self._names_by_metric_name = None
        still_waiting = []
        for condition, future in self._waiters:
            if future.done():
                continue
            if condition(snapshot):
                future.set_result(True)
            else:
                still_waiting.append((condition, future))
        self._waiters = still_waiting

    async def wait_for(self, condition: Callable[[MetadataSnapshot], bool], timeout_ms: int) -> bool:
        """Wait until the view satisfies `condition`; False at the timeout."""
        if condition(self.snapshot):
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append((condition, future))
        deadline = FunctionTimerTask(max(timeout_ms, 0),
                                     lambda: future.done() or future.set_result(False))
        self.timer.add(deadline)
        try:
            return await future
        finally:
            deadline.cancel()

    @property
    def controller_id(self) -> int:
        return self.snapshot.controller_id

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        return self.snapshot.brokers

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return self.snapshot.topics

    def brokers_for(self, listener: str) -> dict[int, tuple[str, int]]:
        """Live brokers as a client of `listener` must reach them (Kafka answers Metadata with
        the endpoints of the listener the request came in on)."""
        endpoints = self.snapshot.endpoints
        return {b: endpoints.get(b, {}).get(listener, address)
                for b, address in self.snapshot.brokers.items()}

    def topic(self, name: str) -> TopicInfo | None:
        return self.snapshot.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        name = self.topic_name(topic_id)
        return None if name is None else self.snapshot.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id (Fetch v13+ asks for each topic it names): an index
        built once per snapshot. The zero id names no topic."""
        if self._names_by_id is None:
            self._names_by_id = {t.topic_id: t.name for t in self.snapshot.topics.values()
                                 if t.topic_id.int != 0}
        return self._names_by_id.get(topic_id)

    def colliding_topics(self, name: str) -> list[str]:
        """Other topics whose metric name would be this one's (Kafka's Topic.hasCollision: '.'
        and '_' are the same in metric names); an index built once per snapshot."""
        if "." not in name and "_" not in name:
            return []
        if self._names_by_metric_name is None:
            index: dict[str, list[str]] = {}
            for topic in self.snapshot.topics:
                if "." in topic or "_" in topic:
                    index.setdefault(topic.replace(".", "_"), []).append(topic)
            self._names_by_metric_name = index
        return [t for t in self._names_by_metric_name.get(name.replace(".", "_"), ()) if t != name]

    def topic_id_of(self, name: str) -> uuid.UUID | None:
        """The topic's current id; None if the topic or its id is unknown."""
        info = self.snapshot.topics.get(name)
        return info.topic_id if info is not None and info.topic_id.int != 0 else None

    def partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        return self.snapshot.partitions.get((topic, partition))

    def has_leaders(self, topic: str) -> bool:
        info = self.snapshot.topics.get(topic)
        return info is not None and all(
            (s := self.snapshot.partitions.get((topic, p))) is not None and s.leader >= 0
            for p in info.assignment
        )
