"""The simulation's faults, drawn from the seed before the run: broker crashes (a power loss
tearing the log tail, when asked for), failing disks, partitions between brokers and between
clients and a broker, slow links, dropped responses, ZooKeeper session expiries and controller
moves."""

from __future__ import annotations

import random
from dataclasses import dataclass

KINDS = ("crash", "power-loss", "disk", "partition", "client-partition", "delay", "drop",
         "session-expiry", "controller-move")
# Without power-loss: Kafka does not fsync each write, and a broker that loses power can lose
# records the others had too, once the ISR has shrunk to it alone (KIP-966's gap).
DEFAULT_KINDS = tuple(k for k in KINDS if k != "power-loss")
INSTANT = {"session-expiry", "controller-move"}
FAULTS_PER_MINUTE = 12.0
QUIET_START_MS = 3_000  # the workload's clients start before the first fault


@dataclass(slots=True, frozen=True)
class PlannedFault:
    at_ms: int
    kind: str
    broker: int
    duration_ms: int = 0  # 0: an instant fault
    # delay: added ms one way; power-loss: bytes torn off each active segment at most; disk:
    # writes that still succeed before they fail; partition: 1 when ZooKeeper is cut off too
    detail: int = 0

    def describe(self) -> str:
        what = {"crash": f"kill broker {self.broker}",
                "power-loss": f"broker {self.broker} loses power (its log tails torn, up to "
                              f"{self.detail} B)",
                "disk": f"broker {self.broker}'s disk fails (EIO) after {self.detail} writes",
                "partition": f"cut broker {self.broker} from the other brokers"
                             + (" and ZooKeeper" if self.detail else ""),
                "client-partition": f"cut the clients from broker {self.broker}",
                "delay": f"slow broker {self.broker}'s links by {self.detail} ms",
                "drop": f"broker {self.broker} drops Produce and Fetch responses",
                "session-expiry": f"expire broker {self.broker}'s ZooKeeper session",
                "controller-move": "expire the controller's ZooKeeper session"}[self.kind]
        during = f" for {self.duration_ms / 1000:g} s" if self.duration_ms else ""
        return f"{self.at_ms / 1000:8.3f}s {what}{during}"


def parse_kinds(text: str) -> tuple[str, ...]:
    """`crash,partition` -> the kinds, in KINDS order; ValueError names an unknown one."""
    if text.strip().lower() in ("", "default"):
        return DEFAULT_KINDS
    if text.strip().lower() == "all":
        return KINDS
    if text.strip().lower() == "none":
        return ()
    asked = {k.strip() for k in text.split(",") if k.strip()}
    unknown = sorted(asked - set(KINDS))
    if unknown:
        raise ValueError(f"unknown fault kind {', '.join(unknown)} (known: {', '.join(KINDS)})")
    return tuple(k for k in KINDS if k in asked)


def plan_faults(seed: int, brokers: list[int], duration_ms: int,
                kinds: tuple[str, ...] = DEFAULT_KINDS,
                per_minute: float = FAULTS_PER_MINUTE) -> list[PlannedFault]:
    """The faults of seed `seed`: the same list for the same arguments."""
    rng = random.Random(f"kafka-sim faults {seed}")
    window = duration_ms - QUIET_START_MS
    if not kinds or window <= 0:
        return []
    count = max(1, round(window / 60_000 * per_minute))
    faults = []
    for at in sorted(rng.randrange(QUIET_START_MS, duration_ms) for _ in range(count)):
        kind = rng.choice(kinds)
        broker = rng.choice(brokers)
        if kind in INSTANT:
            faults.append(PlannedFault(at, kind, broker))
        elif kind == "crash":
            faults.append(PlannedFault(at, kind, broker, rng.randint(8_000, 20_000)))
        elif kind == "power-loss":
            faults.append(PlannedFault(at, kind, broker, rng.randint(8_000, 20_000),
                                       rng.choice((64, 4096))))
        elif kind == "disk":
            faults.append(PlannedFault(at, kind, broker, rng.randint(8_000, 20_000),
                                       rng.randint(0, 50)))
        elif kind == "delay":
            faults.append(PlannedFault(at, kind, broker, rng.randint(2_000, 10_000),
                                       rng.choice((20, 100, 400))))
        elif kind == "partition":
            faults.append(PlannedFault(at, kind, broker, rng.randint(2_000, 12_000),
                                       rng.randint(0, 1)))
        else:
            faults.append(PlannedFault(at, kind, broker, rng.randint(2_000, 12_000)))
    return faults
