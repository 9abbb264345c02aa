"""The history of one simulation: every event the workload, the fault plan and the replica sampler
saw, in order, with the simulated time; its digest names the run (one seed, one digest)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Events shown before any anomaly: what the cluster went through
WHAT_LED_TO_IT = {"fault", "fault-end", "torn", "halted", "session-expired", "broker-start",
                  "heal"}


@dataclass(slots=True, frozen=True)
class Event:
    at_ms: int  # simulated milliseconds since the cluster started
    kind: str
    fields: tuple[tuple[str, Any], ...]

    def get(self, name: str, default: Any = None) -> Any:
        for key, value in self.fields:
            if key == name:
                return value
        return default

    def line(self) -> str:
        shown = " ".join(f"{k}={v}" for k, v in self.fields)
        return f"{self.at_ms / 1000:9.3f}s {self.kind:<18} {shown}"


class History:
    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self.events: list[Event] = []
        self._digest = hashlib.sha256()

    def record(self, kind: str, /, **fields: Any) -> Event:
        event = Event(self._now_ms(), kind, tuple(fields.items()))
        self.events.append(event)
        self._digest.update(f"{event.at_ms}|{kind}|{event.fields!r}\n".encode())
        return event

    def digest(self) -> str:
        """sha256 of the event trace, the first 16 hex digits: equal for equal histories."""
        return self._digest.hexdigest()[:16]

    def of_kind(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def around(self, at_ms: int, about: str | None = None, window_ms: int = 15_000,
               faults: int = 6, latest: int = 10) -> list[Event]:
        """What led to an anomaly at `at_ms`: the last `faults` faults, restarts and torn logs of
        the `window_ms` before it, and the `latest` events about partition `about` ("sim-1")."""
        _, _, index = (about or "").rpartition("-")
        shown: list[Event] = []
        wanted = {"cluster": faults, "partition": latest}
        for event in reversed(self.events):
            if event.at_ms > at_ms + 100:
                continue
            if event.at_ms < at_ms - window_ms or not any(wanted.values()):
                break
            partition = event.get("partition")
            if event.kind in WHAT_LED_TO_IT:
                which = "cluster"
            elif about is not None and (partition == about or event.kind != "replica"
                                        and str(partition) == index):
                which = "partition"
            else:
                continue
            if wanted[which]:
                wanted[which] -= 1
                shown.append(event)
        return shown[::-1]
