"""StateMachine: the states of the controller's partitions or replicas, changed only along the
valid transitions Kafka's controller allows, each change remembered (the last few per key) for the
control API. The two machines are partition_state_machine.py and replica_state_machine.py."""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from broker.logs import get_logger

log = get_logger("kafka_sim.controller")

HISTORY = 5  # transitions kept per key

K = TypeVar("K", bound=Hashable)
S = TypeVar("S", bound=enum.Enum)


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of a key's state: from what, to what, when (broker time) and why."""
    previous: str
    state: str
    at_ms: int
    reason: str


class StateMachine(Generic[K, S]):
    """A state per key (absent keys are in `initial`); `transition` refuses, and logs, a change
    from a state its target does not list as a valid previous one: the controller went wrong
    there, as Kafka's logs an IllegalStateException and leaves the state as it was."""

    def __init__(self, name: str, initial: S, valid_previous: Mapping[S, frozenset[S]],
                 now_ms: Callable[[], int]) -> None:
        self.name = name
        self.initial = initial
        self.valid_previous = valid_previous
        self._now_ms = now_ms
        self._states: dict[K, S] = {}
        self._history: dict[K, deque[Transition]] = {}
        self.invalid_transitions = 0

    def state(self, key: K) -> S:
        return self._states.get(key, self.initial)

    def transition(self, keys: Iterable[K], target: S, reason: str) -> list[K]:
        """Move each key to `target` where valid; returns the keys refused."""
        refused = []
        for key in keys:
            current = self._states.get(key, self.initial)
            if current not in self.valid_previous[target]:
                self.invalid_transitions += 1
                log.error("invalid state transition refused", machine=self.name, key=str(key),
                          current=current.value, target=target.value, reason=reason)
                refused.append(key)
                continue
            if current == target:
                continue  # e.g. an online partition whose leader changed: no new state
            if target == self.initial:
                self._states.pop(key, None)
                self._history.pop(key, None)
                continue
            self._states[key] = target
            self._history.setdefault(key, deque(maxlen=HISTORY)).append(
                Transition(current.value, target.value, self._now_ms(), reason))
        return refused

    def forget(self, keys: Iterable[K]) -> None:
        """Stop tracking keys the controller no longer knows (a new controller starts afresh)."""
        for key in keys:
            self._states.pop(key, None)
            self._history.pop(key, None)

    def history(self, key: K) -> list[dict]:
        return [{"from": t.previous, "to": t.state, "at_ms": t.at_ms, "reason": t.reason}
                for t in self._history.get(key, ())]

    def counts(self) -> dict[str, int]:
        """Keys per state (those in the initial state are not tracked)."""
        out: dict[str, int] = {}
        for state in self._states.values():
            out[state.value] = out.get(state.value, 0) + 1
        return out
