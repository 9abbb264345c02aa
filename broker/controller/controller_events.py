"""The controller's events, one class each, as Kafka's ControllerEvent case classes: what changed
in the store (a child watch fired: the children are read when the event is processed), what a
broker answered, what a timer or an operator asked, and the admin requests only the controller
answers (each with the future its answer goes to). The controller processes them one at a time,
in order, on its own task."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import ClassVar

from broker.metadata import zk_paths as paths
from protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


class ControllerEvent:
    """An event without fields is a plain class, one with fields a frozen dataclass: defining a
    dataclass is start-up work, and this module loads at every start."""
    __slots__ = ()
    kind: ClassVar[str]  # its name in the controller's counts (events_handled)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Startup(ControllerEvent):
    kind = "startup"


class ChildChange(ControllerEvent):
    """A child watch fired on `path`; the event reads the children (and watches them again)."""
    path: ClassVar[str]


class BrokerChange(ChildChange):
    kind, path = "broker_change", paths.BROKER_IDS


class TopicChange(ChildChange):
    kind, path = "topic_change", paths.TOPICS


class TopicDeletion(ChildChange):
    kind, path = "topic_deletion", paths.DELETE_TOPICS


class IsrChangeNotification(ChildChange):
    kind, path = "isr_change", paths.ISR_CHANGES


class LogDirEventNotification(ChildChange):
    kind, path = "log_dir_event", paths.LOG_DIR_EVENTS


CHILD_CHANGES: tuple[type[ChildChange], ...] = (
    BrokerChange, TopicChange, TopicDeletion, IsrChangeNotification, LogDirEventNotification)


@dataclass(frozen=True, slots=True)
class PartitionModifications(ControllerEvent):
    """A topic's node changed: CreatePartitions grew it."""
    kind = "partition_change"
    topic: str


@dataclass(frozen=True, slots=True)
class TopicConfigChange(ControllerEvent):
    kind = "config_change"
    topic: str


@dataclass(frozen=True, slots=True)
class ReplicasOffline(ControllerEvent):
    """A broker answered KAFKA_STORAGE_ERROR for these replicas in LeaderAndIsr."""
    kind = "replicas_offline"
    broker_id: int
    keys: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class StopReplicaResponse(ControllerEvent):
    """A broker answered a deleted topic's StopReplica(delete)."""
    kind = "stop_replica_response"
    broker_id: int
    errors: dict[TopicPartition, ErrorCode]


class PreferredReplicaElection(ControllerEvent):
    """Leadership back to the preferred replicas (`ctl elect-leaders`)."""
    kind = "preferred_election"


class AutoPreferredReplicaElection(ControllerEvent):
    """The auto leader rebalance's periodic check."""
    kind = "auto_leader_rebalance"


@dataclass(frozen=True, slots=True)
class ControllerRequest(ControllerEvent):
    """An admin request: its answer (or error) goes to `future`."""
    future: asyncio.Future = field(compare=False)


@dataclass(frozen=True, slots=True)
class ControlledShutdown(ControllerRequest):
    kind = "controlled_shutdown"
    broker_id: int = -1


@dataclass(frozen=True, slots=True)
class ElectLeaders(ControllerRequest):
    kind = "elect_leaders"
    keys: list[TopicPartition] = field(default_factory=list)
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignments(ControllerRequest):
    kind = "alter_reassignments"
    reassignments: dict[TopicPartition, list[int] | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ListPartitionReassignments(ControllerRequest):
    kind = "list_reassignments"
    keys: list[TopicPartition] | None = None
