"""Seeded fault schedules for users' own tests: one seed gives one list of faults (which broker,
what, from when, for how long), and a runner applies it to a running cluster through its control
API while the test runs. A test that failed under seed N runs again under the same faults.

The faults are the control API's: requests delayed, answered with a retriable error, processed
and their answers dropped, or their connections closed; and a broker stopped and started again
(one at a time, so the cluster keeps a majority)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.control.control_client import ControlClient

KINDS = ("delay", "error", "drop", "disconnect", "restart")
# The requests a fault may hit, and (kind "error") the retriable error each is answered with
APIS = ("Produce", "Fetch", "Metadata", "ListOffsets")
RETRIABLE = {"Produce": "NOT_LEADER_OR_FOLLOWER", "Fetch": "NOT_LEADER_OR_FOLLOWER",
             "Metadata": "LEADER_NOT_AVAILABLE", "ListOffsets": "NOT_LEADER_OR_FOLLOWER"}
MIN_FAULT_S, MAX_FAULT_S = 0.2, 2.0
MIN_DELAY_MS, MAX_DELAY_MS = 20, 500


@dataclass(frozen=True, slots=True)
class ScheduledFault:
    at_s: float  # from the schedule's start
    duration_s: float
    broker: int
    kind: str
    api: str | None = None  # all kinds but restart
    delay_ms: int | None = None  # kind delay

    def describe(self) -> str:
        what = {"delay": f"{self.api} delayed {self.delay_ms} ms",
                "error": f"{self.api} answered {RETRIABLE.get(self.api or '')}",
                "drop": f"{self.api} answers dropped",
                "disconnect": f"{self.api} connections closed",
                "restart": "stopped, then started again"}[self.kind]
        return (f"{self.at_s:7.2f} s +{self.duration_s:.2f} s  broker {self.broker}: {what}")


@dataclass(frozen=True, slots=True)
class FaultSchedule:
    seed: int
    faults: tuple[ScheduledFault, ...]

    @classmethod
    def from_seed(cls, seed: int, *, brokers: int = 1, duration_s: float = 30.0,
                  kinds: Iterable[str] = KINDS, faults_per_s: float = 0.5) -> FaultSchedule:
        """The faults `seed` gives for a cluster of `brokers` over `duration_s` seconds: about
        `faults_per_s` of them a second, of the given kinds (a restart only with two brokers or
        more, and never while another broker is down)."""
        asked = set(kinds)
        if not asked or asked - set(KINDS):
            raise ValueError(f"fault kinds are among {', '.join(KINDS)}; got "
                             f"{', '.join(sorted(asked)) or 'none'}")
        kinds = tuple(k for k in KINDS if k in asked)
        if brokers < 2:
            kinds = tuple(k for k in kinds if k != "restart") or ("delay",)
        rng = random.Random(seed)
        count = max(1, round(duration_s * faults_per_s))
        faults = []
        down_until = 0.0
        for at in sorted(rng.uniform(0, duration_s) for _ in range(count)):
            kind = rng.choice(kinds)
            broker = rng.randrange(brokers)
            length = rng.uniform(MIN_FAULT_S, MAX_FAULT_S)
            if kind == "restart":
                if at < down_until:
                    kind = "delay"  # one broker down at a time
                else:
                    down_until = at + length
            api = None if kind == "restart" else rng.choice(APIS)
            delay = rng.randint(MIN_DELAY_MS, MAX_DELAY_MS) if kind == "delay" else None
            faults.append(ScheduledFault(round(at, 3), round(length, 3), broker, kind, api,
                                         delay))
        return cls(seed, tuple(faults))

    def describe(self) -> str:
        return "\n".join([f"fault schedule of seed {self.seed}:",
                          *(f.describe() for f in self.faults)])


class ScheduleRunner:
    """Applies a schedule to a running cluster through its control API, in real time from
    start() (or all at once with run(wait=...), as a test drives it). stop() ends what is
    still on: its faults cleared, a stopped broker started."""

    def __init__(self, control: ControlClient, schedule: FaultSchedule,
                 on_step: Callable[[str], None] | None = None) -> None:
        self.control = control
        self.schedule = schedule
        self.on_step = on_step
        self.steps: list[str] = []  # what was done, in order
        self._active: dict[int, int | None] = {}  # fault index -> its fault id (None: restart)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def timeline(self) -> list[tuple[float, int, bool]]:
        """(time, fault index, begins) in order: a fault ends before one begins at its time."""
        events = [(f.at_s, i, True) for i, f in enumerate(self.schedule.faults)]
        events += [(f.at_s + f.duration_s, i, False) for i, f in enumerate(self.schedule.faults)]
        return sorted(events, key=lambda e: (e[0], e[2]))

    def run(self, wait: Callable[[float], bool] | None = None) -> None:
        """Apply the timeline; `wait(seconds)` waits until the next step (True: stop now)."""
        wait = wait if wait is not None else self._stop.wait
        started = time.monotonic()
        try:
            for at, index, begins in self.timeline():
                if wait(max(0.0, at - (time.monotonic() - started))):
                    return
                (self._begin if begins else self._end)(index)
        finally:
            self.stop_faults()

    def start(self) -> ScheduleRunner:
        self._thread = threading.Thread(target=self.run, name="kafka-sim-faults", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        self.stop_faults()

    def stop_faults(self) -> None:
        for index in list(self._active):
            self._end(index)

    def _begin(self, index: int) -> None:
        fault = self.schedule.faults[index]
        control = self.control
        if fault.kind == "restart":
            control.stop_broker(fault.broker)
            self._active[index] = None
        else:
            action = {"delay": {"delay_ms": fault.delay_ms},
                      "error": {"error": RETRIABLE[fault.api or ""]},
                      "drop": {"drop_response": True},
                      "disconnect": {"disconnect": True}}[fault.kind]
            self._active[index] = control.add_fault(fault.broker, fault.api or "", **action)["id"]
        self._step(f"on  {fault.describe()}")

    def _end(self, index: int) -> None:
        if index not in self._active:
            return
        fault = self.schedule.faults[index]
        fault_id = self._active.pop(index)
        if fault_id is None:
            self.control.start_broker(fault.broker)
        else:
            self.control.clear_faults(id=fault_id)
        self._step(f"off {fault.describe()}")

    def _step(self, line: str) -> None:
        self.steps.append(line)
        if self.on_step is not None:
            self.on_step(line)
