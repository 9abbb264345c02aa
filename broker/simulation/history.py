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

    @property
    def last_ms(self) -> int:
        """When the last event happened (0 before any)."""
        return self.events[-1].at_ms if self.events else 0

    def digest(self) -> str:
        """sha256 of the event trace, the first 16 hex digits: equal for equal histories."""
        return self._digest.hexdigest()[:16]

    def of_kind(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def around(self, at_ms: int, about: str | None = None, window_ms: int = 15_000,
               faults: int = 6, latest: int = 10) -> list[Event]:
        """What led to an anomaly at `at_ms`: the latest `latest` events about partition `about`
        ("sim-1") up to then, and the faults, restarts and torn logs of the `window_ms` around
        it (after it too: an acknowledged write is lost by what comes later), at most `faults`
        of them, the nearest first."""
        _, _, index = (about or "").rpartition("-")
        mine = []
        for event in reversed(self.events):
            if len(mine) >= latest or event.at_ms < at_ms - window_ms:
                break
            partition = event.get("partition")
            if event.at_ms <= at_ms and about is not None and event.kind not in WHAT_LED_TO_IT \
                    and (partition == about or event.kind != "replica" and str(partition) == index):
                mine.append(event)
        cluster = [e for e in self.events if e.kind in WHAT_LED_TO_IT
                   and abs(e.at_ms - at_ms) <= window_ms
                   and (e.kind != "torn" or e.get("log") == about)]  # its own log's tear only
        cluster = sorted(cluster, key=lambda e: abs(e.at_ms - at_ms))[:faults]
        return sorted([*mine, *cluster], key=lambda e: e.at_ms)
