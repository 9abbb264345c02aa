"""The chaos monkey: faults drawn from a seeded RNG against a ProcessCluster — kill -9 and restart,
SIGSTOP/SIGCONT, dropped Produce/Fetch responses — never more than one broker down at a time."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.process_cluster import ProcessCluster, wait_until

# Dropped responses by kind: what a client, a follower or the controller then has to retry.
DROPPED = {"drop-produce-response": ("Produce",),
           "drop-fetch-response": ("Fetch",),  # consumers' and followers' fetches alike
           "drop-group-response": ("OffsetCommit", "JoinGroup", "SyncGroup", "Heartbeat"),
           "drop-interbroker-response": ("LeaderAndIsr", "UpdateMetadata", "OffsetForLeaderEpoch")}
# Delayed requests: a follower's Fetch held past replica.lag.time.max.ms (3 s) shrinks the ISR
# under an acks=all produce (NOT_ENOUGH_REPLICAS_AFTER_APPEND, then a retry of an appended batch).
DELAYED = ("Fetch", "Produce", "OffsetCommit", "LeaderAndIsr")
KINDS = ("kill-9", "sigterm", "kill-9-during-shutdown", "sigstop", "delay-request", *DROPPED)
HEAL_TIMEOUT_S = 60.0


@dataclass
class ChaosMonkey:
    cluster: ProcessCluster
    seed: int
    healed: Callable[[set[int]], bool]  # every partition's ISR full, asked of the given brokers
    log: Callable[[str], None] = print
    faults: Counter = field(default_factory=Counter)
    stuck: list[str] = field(default_factory=list)  # faults after which the cluster did not heal
    paused: set[int] = field(default_factory=set)  # SIGSTOPped right now
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._actions = {"kill-9": self._kill_and_restart, "sigstop": self._stop_and_continue,
                         "sigterm": self._terminate_and_restart, "delay-request": self._delay,
                         "kill-9-during-shutdown": self._kill_during_shutdown,
                         **{kind: lambda b, apis=apis: self._drop(b, self.rng.choice(apis))
                            for kind, apis in DROPPED.items()}}

    def start(self, seconds: float) -> ChaosMonkey:
        self._thread = threading.Thread(target=self._run, args=(seconds,), name="chaos-monkey",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        return self

    def join(self) -> None:
        assert self._thread is not None
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _run(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and not self._stop.is_set():
                time.sleep(self.rng.uniform(0.1, 1.0))
                kind = self.rng.choice(KINDS)
                victim = self.rng.choice(self.cluster.ids)
                self._actions[kind](victim)
                self.faults[kind] += 1
        except BaseException as exc:  # noqa: BLE001 - handed to join()
            self.error = exc
        finally:
            self.resume_all()

    def _kill_and_restart(self, victim: int) -> None:
        self.log(f"chaos: kill -9 broker {victim}")
        self.cluster.kill(victim)
        time.sleep(self.rng.uniform(0.5, 3.0))
        self._restart(victim, f"kill -9 of broker {victim}")

    def _terminate_and_restart(self, victim: int) -> None:
        self.log(f"chaos: SIGTERM broker {victim} (controlled shutdown)")
        self.cluster.kill(victim, signal.SIGTERM)
        self._restart(victim, f"SIGTERM of broker {victim}")

    def _kill_during_shutdown(self, victim: int) -> None:
        grace = self.rng.uniform(0.0, 1.5)
        self.log(f"chaos: SIGTERM broker {victim}, kill -9 after {grace:.1f} s")
        process = self.cluster.processes[victim]
        process.send_signal(signal.SIGTERM)
        time.sleep(grace)
        if process.poll() is None:
            process.kill()
        process.wait(30)
        self._restart(victim, f"kill -9 {grace:.1f} s into broker {victim}'s shutdown")

    def _restart(self, victim: int, after: str) -> None:
        """Start it again on the same ports and log dir: it recovers, truncates, catches up. As
        Kafka's, a broker cannot register while its dead session's /brokers/ids/N lives on: the
        restart waits until ZooKeeper expired it (what a supervisor's restart backoff does)."""
        other = next(i for i in self.cluster.ids if i != victim)
        wait_until(lambda: not self.cluster.registered(victim, via=other),
                   f"broker {victim}'s registration to go")
        self.cluster.start(victim)
        self._wait_back(victim, after)

    def _stop_and_continue(self, victim: int) -> None:
        pause = self.rng.uniform(0.5, 6.0)  # past zookeeper.session.timeout.ms (3 s) at times
        self.log(f"chaos: SIGSTOP broker {victim} for {pause:.1f} s")
        self.paused.add(victim)
        self.cluster.kill(victim, signal.SIGSTOP)
        time.sleep(pause)
        self.cluster.kill(victim, signal.SIGCONT)
        self.paused.discard(victim)
        self._wait_back(victim, f"SIGSTOP of broker {victim} for {pause:.1f} s")

    def _drop(self, victim: int, api: str) -> None:
        count = self.rng.randint(1, 3)
        self.log(f"chaos: drop the next {count} {api} responses of broker {victim}")
        self.cluster.control(victim, "/faults", "POST",
                             {"broker": victim, "api": api, "drop_response": True, "count": count})

    def _delay(self, victim: int) -> None:
        api, count, delay_ms = self.rng.choice(DELAYED), self.rng.randint(1, 3), self.rng.randint(200, 5000)
        self.log(f"chaos: delay the next {count} {api} requests of broker {victim} by {delay_ms} ms")
        self.cluster.control(victim, "/faults", "POST", {"broker": victim, "api": api, "count": count,
                                                         "delay_ms": delay_ms})  # fmt: skip

    def _wait_back(self, victim: int, after: str) -> None:
        """One broker down at a time: the next fault waits until the victim is registered again,
        and half of the time until every ISR is full again (otherwise the next fault may hit
        while it still catches up: a shrunk ISR loses its leader, a follower truncates twice)."""
        other = next(i for i in self.cluster.ids if i != victim)
        wait_until(lambda: self.cluster.registered(victim, via=other),
                   f"broker {victim} registered again", HEAL_TIMEOUT_S)
        if self.rng.random() < 0.5:
            self._wait_healed(after)

    def _wait_healed(self, after: str) -> None:
        deadline = time.monotonic() + HEAL_TIMEOUT_S
        while not self._stop.is_set():
            try:
                if self.healed(set(self.cluster.ids) - self.paused):
                    return
            except (OSError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                self.stuck.append(after)
                self.log(f"chaos: no full ISR {HEAL_TIMEOUT_S:.0f} s after {after}")
                return
            time.sleep(0.2)

    def resume_all(self) -> None:
        for broker_id in list(self.paused):
            self.cluster.kill(broker_id, signal.SIGCONT)
            self.paused.discard(broker_id)

    def stop(self) -> None:
        self._stop.set()
