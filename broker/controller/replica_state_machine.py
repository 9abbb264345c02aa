"""ReplicaStateMachine: each replica (topic, partition, broker) New, Online (its broker live and
its log dir working), Offline, or on its way out of a deleted topic (ReplicaDeletionStarted, then
Successful or Ineligible), moved only as Kafka's controller moves it."""

from __future__ import annotations

import enum
from collections.abc import Callable

from broker.controller.state_machine import StateMachine


class ReplicaState(enum.Enum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


_R = ReplicaState
VALID_PREVIOUS = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}

Replica = tuple[str, int, int]  # topic, partition, broker


class ReplicaStateMachine(StateMachine[Replica, ReplicaState]):
    def __init__(self, now_ms: Callable[[], int]) -> None:
        super().__init__("replica", ReplicaState.NON_EXISTENT, VALID_PREVIOUS, now_ms)
