"""PartitionStateMachine: each partition NonExistent, New (created, no leader elected yet), Online
(a live leader) or Offline (no live leader), moved only as Kafka's controller moves it."""

from __future__ import annotations

import enum
from collections.abc import Callable

from broker.controller.state_machine import StateMachine


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


_P = PartitionState
VALID_PREVIOUS = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}


class PartitionStateMachine(StateMachine[tuple[str, int], PartitionState]):
    def __init__(self, now_ms: Callable[[], int]) -> None:
        super().__init__("partition", PartitionState.NON_EXISTENT, VALID_PREVIOUS, now_ms)
