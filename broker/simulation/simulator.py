"""One seeded simulation: the embedded cluster, the built-in workload and the seed's faults on a
SimulatedLoop, the replica sampler writing the brokers' states down, and the checker at the end.
The same seed (and the same arguments, code and machine) gives the same history and digest."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from broker.config import build_config
from broker.metadata.embedded_store import EmbeddedMetadataStore
from broker.server.cluster import Cluster
from broker.simulation.checker import Anomaly, FinalLog, check
from broker.simulation.fault_plan import DEFAULT_KINDS, PlannedFault, plan_faults
from broker.simulation.history import History
from broker.simulation.sim_loop import SimulatedLoop
from broker.simulation.sim_network import SimulatedNetwork
from broker.simulation.workload import (
    CREATE_TOPICS,
    Actor,
    ClusterView,
    GroupMember,
    IdempotentProducer,
    KeyedProducer,
    OffsetCommitter,
    Reader,
    TransactionalProducer,
    WorkloadSpec,
)
from timer import VirtualClock

# The simulated wall clock starts at 2026-01-01T00:00:00Z, whatever the real date.
WALL_EPOCH_MS = 1_767_225_600_000
SAMPLE_EVERY_MS = 50
HEAL_TIMEOUT_MS = 120_000
BROKER_PROPERTIES = {
    # Kafka's settings for durability: acks=all needs two replicas, no unclean elections.
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.session.timeout.ms": "10000",
    # Failures are noticed within seconds of simulated time (Kafka's defaults are 10-30 s).
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
    "control.listener": "",
    "listeners": "PLAINTEXT://127.0.0.1:0",
}


# Segments that roll every few seconds of the workload and a cleaner that takes them at once, so
# that a simulated minute sees the log cleaner compact the keyed records.
COMPACTED_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "4096",
                     "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}


@dataclass(slots=True)
class SimulationResult:
    seed: int
    digest: str
    history: History
    anomalies: list[Anomaly]
    faults: list[PlannedFault]
    simulated_ms: int
    real_s: float
    healed: bool
    counts: dict[str, int] = field(default_factory=dict)


def simulate(seed: int, data_dir: Path, *, duration_ms: int = 60_000,
             kinds: tuple[str, ...] = DEFAULT_KINDS, faults: list[PlannedFault] | None = None,
             defect: str = "", brokers: int = 3, spec: WorkloadSpec | None = None,
             ) -> SimulationResult:
    """Run seed `seed` (with `faults` instead of the seed's own, for --shrink) in `data_dir`."""
    started = time.perf_counter()
    plan = faults if faults is not None else plan_faults(seed, list(range(brokers)),
                                                         duration_ms, kinds)
    loop = SimulatedLoop()
    try:
        with _seeded_ids(seed):
            run = _Simulation(seed, data_dir, duration_ms, plan, defect, brokers,
                              spec or WorkloadSpec())
            result = loop.run_until_complete(run.run())
    finally:
        _cancel_remaining(loop)
        loop.close()
    result.real_s = time.perf_counter() - started
    return result


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still running (a failed run's tasks) and let it finish, as asyncio.run."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


@contextlib.contextmanager
def _seeded_ids(seed: int) -> Iterator[None]:
    """Random ids (topic ids, member ids, the cluster id) drawn from the seed while it runs."""
    rng = random.Random(f"kafka-sim ids {seed}")
    real_uuid4, state = uuid.uuid4, random.getstate()
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)
    random.seed(f"kafka-sim random {seed}")
    try:
        yield
    finally:
        uuid.uuid4 = real_uuid4
        random.setstate(state)


class _Simulation:
    def __init__(self, seed: int, data_dir: Path, duration_ms: int, plan: list[PlannedFault],
                 defect: str, brokers: int, spec: WorkloadSpec) -> None:
        self.seed = seed
        self.data_dir = data_dir
        self.duration_ms = duration_ms
        self.plan = plan
        self.defect = defect
        self.num_brokers = brokers
        self.spec = spec
        self.rng = random.Random(f"kafka-sim workload {seed}")

    def now_ms(self) -> int:
        return int(self.loop.time() * 1000)

    def wall_ms(self) -> int:
        return WALL_EPOCH_MS + self.now_ms()

    async def run(self) -> SimulationResult:
        self.loop = asyncio.get_running_loop()
        self.history = History(self.now_ms)
        clock = VirtualClock(self.now_ms, self.wall_ms)
        config = build_config({**BROKER_PROPERTIES, "log.dirs": str(self.data_dir),
                               "simulation.defect": self.defect}, environ={})
        self.cluster = Cluster(config, self.num_brokers, clock=clock,
                               store=EmbeddedMetadataStore())
        self.cluster.context.inline_io = True
        self.network = SimulatedNetwork(self.loop)
        await self.cluster.start()
        for broker_id in self.cluster.configs:
            self.network.listen(f"broker-{broker_id}", functools.partial(self._accept, broker_id))
        self.down: set[int] = set()
        self.active: dict[str, int] = {}  # fault kind -> the broker it holds
        self.healing = False
        self.cluster.context.on_broker_halt = lambda broker_id: self.history.record(
            "halted", broker=broker_id)
        await self._create_topic()
        sampler = asyncio.ensure_future(self._sample())
        self.history.record("start", seed=self.seed, brokers=self.num_brokers,
                            faults=len(self.plan))
        self.actors = actors = self._actors()
        work = [asyncio.ensure_future(a.run(self.duration_ms)) for a in actors]
        faults = asyncio.ensure_future(self._apply_faults())
        await asyncio.gather(*work, faults)
        await self._heal()
        unhealed = await self._wait_until_healed()
        healed = not unhealed
        final, compacted = await self._read_back()
        sampler.cancel()
        for actor in actors:
            actor.view.close()
        self.history.record("end", healed=healed, why=unhealed)
        anomalies = check(self.history, final, unhealed, self.spec.topic, compacted,
                          self.spec.compacted_topic)
        await self.cluster.stop()
        counts = {kind: len(self.history.of_kind(kind)) for kind in
                  ("ack", "unknown", "read", "txn-commit", "txn-abort", "txn-unknown", "commit",
                   "keyed-ack", "fault", "fault-skipped")}
        counts["requests"] = self.network.requests
        counts["keyed-records"] = sum(len(e.get("values"))
                                      for e in self.history.of_kind("keyed-ack"))
        counts["compacted-away"] = sum(
            1 for e in self.history.of_kind("keyed-ack")
            for i, v in enumerate(e.get("values")) if compacted.get(e.get("offset") + i) != v)
        return SimulationResult(self.seed, self.history.digest(), self.history, anomalies,
                                self.plan, self.now_ms(), 0.0, healed, counts)

    async def _accept(self, broker_id: int, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        broker = self.cluster.brokers.get(broker_id)
        if broker is None or not broker.running:
            writer.close()  # as a refused connection: the client sees it closed at once
            return
        await broker.serve_connection("PLAINTEXT", reader, writer)

    async def _create_topic(self) -> None:
        """The workload's topic, created as a client creates one (CreateTopics, then Metadata
        until every partition has a leader)."""
        view = ClusterView(self.network, "admin", sorted(self.cluster.configs),
                           random.Random(self.seed), self.spec.topic)
        replicas = min(3, self.num_brokers)
        created = None
        while created is None:
            created = await view.any_broker(CREATE_TOPICS, 5, {
                "topics": [{"name": self.spec.topic, "num_partitions": self.spec.partitions,
                            "replication_factor": replicas, "assignments": [], "configs": []},
                           {"name": self.spec.compacted_topic, "num_partitions": 1,
                            "replication_factor": replicas, "assignments": [],
                            "configs": [{"name": k, "value": v}
                                        for k, v in COMPACTED_CONFIGS.items()]}],
                "timeout_ms": 10_000, "validate_only": False})
        for topic, partitions in ((self.spec.topic, self.spec.partitions),
                                  (self.spec.compacted_topic, 1)):
            view.topic, view.leaders = topic, {}
            while len(view.leaders) < partitions:
                await asyncio.sleep(0.01)
                await view.refresh()
        view.close()

    def _actors(self) -> list[Actor]:
        brokers = sorted(self.cluster.configs)

        def make(cls, name: str, **kw) -> Actor:
            rng = random.Random(f"{self.seed} {name}")
            return cls(name, self.network, self.history, brokers, rng, self.spec, self.wall_ms,
                       **kw)

        readers = [make(Reader, f"reader-{p}", partition=p) for p in range(self.spec.partitions)]
        return [*(make(IdempotentProducer, f"idem-{i}")
                  for i in range(self.spec.idempotent_producers)),
                *(make(TransactionalProducer, f"txn-{i}")
                  for i in range(self.spec.transactional_producers)),
                *(make(KeyedProducer, f"keyed-{i}", topic=self.spec.compacted_topic)
                  for i in range(self.spec.keyed_producers)),
                *readers, make(OffsetCommitter, "committer", readers=readers),
                *(make(GroupMember, f"member-{i}") for i in range(self.spec.group_members))]

    # -- faults --------------------------------------------------------------------------------

    async def _apply_faults(self) -> None:
        for number, fault in enumerate(self.plan, 1):
            await asyncio.sleep(max(0.0, fault.at_ms / 1000 - self.loop.time()))
            skipped = self._why_not(fault)
            if skipped:
                self.history.record("fault-skipped", number=number, kind=fault.kind,
                                    broker=fault.broker, why=skipped)
                continue
            self.history.record("fault", number=number, kind=fault.kind, broker=fault.broker,
                                duration_ms=fault.duration_ms, detail=fault.detail)
            await self._start_fault(fault)
            if fault.duration_ms:
                self.active[fault.kind] = fault.broker
                self.loop.call_later(fault.duration_ms / 1000,
                                     lambda f=fault: asyncio.ensure_future(self._end_fault(f)))

    def _why_not(self, fault: PlannedFault) -> str:
        """Why the fault is not applied now ('' when it is): one of a kind at a time, and a
        crash only when every replica is in sync (a second crash before the first one's broker
        caught up could lose acknowledged records legitimately: Kafka does not fsync)."""
        if fault.kind in self.active:
            return f"a {fault.kind} fault is on"
        if fault.kind in ("crash", "power-loss", "disk"):
            if self.down:
                return "a broker is down"
            if not self._in_sync():
                return "a replica is out of sync"
        if fault.kind in ("session-expiry", "controller-move", "drop", "delay") and \
                fault.broker in self.down:
            return "that broker is down"
        return ""

    def _in_sync(self) -> bool:
        for broker in self.cluster.brokers.values():
            if not broker.running:
                return False
            for partition in broker.replica_manager.partitions.values():
                if partition.is_leader and set(partition.isr) != set(partition.replicas):
                    return False
        return True

    async def _start_fault(self, fault: PlannedFault) -> None:
        broker = self.cluster.brokers[fault.broker]
        others = [b for b in self.cluster.configs if b != fault.broker]
        context = self.cluster.context
        if fault.kind in ("crash", "power-loss"):
            self.down.add(fault.broker)
            await broker.stop(crash=True)
            self._tear_tails(fault.broker, fault.detail)
        elif fault.kind == "disk":
            # Its next writes fail: the log dir goes offline and the broker halts (its only dir).
            self.down.add(fault.broker)
            context.disk_faults_for(fault.broker).add("write", "EIO", after_ops=fault.detail)
        elif fault.kind == "partition":
            context.cut_links.update(frozenset((fault.broker, b)) for b in others)
            if fault.detail:  # ZooKeeper too: its session expires after the session timeout
                timeout_s = self.cluster.config["zookeeper.session.timeout.ms"] / 1000
                self.loop.call_later(timeout_s, lambda: asyncio.ensure_future(
                    self._expire_while_cut(fault)))
        elif fault.kind == "client-partition":
            self.network.partition(self._clients(), [f"broker-{fault.broker}"])
        elif fault.kind == "delay":
            self.network.delay(f"broker-{fault.broker}", fault.detail / 1000)
            context.link_delays.update(dict.fromkeys(
                (frozenset((fault.broker, b)) for b in others), fault.detail / 1000))
        elif fault.kind == "drop":
            for api in ("Produce", "Fetch"):
                context.faults.add(fault.broker, api, drop_response=True)
        elif fault.kind == "session-expiry":
            await broker.expire_session()
        elif fault.kind == "controller-move":
            controller = self.cluster.active_controller()
            holder = next((b for b in self.cluster.brokers.values()
                           if b.controller is controller), None) if controller else None
            if holder is not None:
                await holder.expire_session()

    async def _expire_while_cut(self, fault: PlannedFault) -> None:
        """The cut broker's ZooKeeper session expires: the controller takes it for dead and
        elects other leaders. It registers again at once (its link to ZooKeeper back before its
        links to the brokers): a leader that kept answering meanwhile learns it is not one."""
        broker = self.cluster.brokers[fault.broker]
        if self.active.get("partition") == fault.broker and broker.running:
            self.history.record("session-expired", broker=fault.broker)
            await broker.expire_session()

    async def _end_fault(self, fault: PlannedFault) -> None:
        if self.healing:
            return  # the end of the run healed it already
        self.active.pop(fault.kind, None)
        self.history.record("fault-end", kind=fault.kind, broker=fault.broker)
        context = self.cluster.context
        if fault.kind in ("crash", "power-loss"):
            await self._restart(fault.broker)
        elif fault.kind == "disk":  # a new disk: the broker starts again and recovers its logs
            context.clear_disk_faults(broker_id=fault.broker)
            await self._stop_halted(fault.broker)
            await self._restart(fault.broker)
        elif fault.kind == "partition":
            context.cut_links.difference_update(
                frozenset((fault.broker, b)) for b in self.cluster.configs)
        elif fault.kind == "client-partition":
            self.network.heal(self._clients(), [f"broker-{fault.broker}"])
        elif fault.kind == "delay":
            self.network.delay(f"broker-{fault.broker}", 0)
            context.link_delays.clear()
        elif fault.kind == "drop":
            context.faults.clear(broker_id=fault.broker)

    async def _stop_halted(self, broker_id: int) -> None:
        """A broker whose disk failed has halted itself; one that wrote nothing meanwhile is
        stopped as a killed process."""
        broker = self.cluster.brokers[broker_id]
        if broker.running:
            await broker.stop(crash=True)

    async def _restart(self, broker_id: int) -> None:
        """Start the crashed broker again, once the store has let its old session go."""
        while broker_id in self.down:
            try:
                await self.cluster.start_broker(broker_id)
            except Exception as exc:  # noqa: BLE001 - its old session lingers: try again
                self.history.record("restart-refused", broker=broker_id,
                                    why=type(exc).__name__)
                await asyncio.sleep(1.0)
                continue
            self.down.discard(broker_id)
            self.history.record("broker-start", broker=broker_id)

    def _tear_tails(self, broker_id: int, most_bytes: int) -> None:
        """Cut up to `most_bytes` off the end of each partition's newest segment: what a power
        loss takes of writes never fsynced (a torn last batch included)."""
        if not most_bytes:
            return
        rng = random.Random(f"{self.seed} tear {self.now_ms()} {broker_id}")
        root = self.data_dir / f"broker-{broker_id}"
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            segments = sorted(folder.glob("*.log"))
            if not segments:
                continue
            newest = segments[-1]
            size = newest.stat().st_size
            cut = min(size, rng.randint(0, most_bytes))
            if cut:
                with open(newest, "r+b") as f:
                    f.truncate(size - cut)
                self.history.record("torn", broker=broker_id, log=folder.name, bytes=cut)

    def _clients(self) -> list[str]:
        return [actor.name for actor in self.actors]  # each a host of its own

    async def _heal(self) -> None:
        self.healing = True
        self.history.record("heal")
        self.active.clear()
        self.cluster.context.cut_links.clear()
        self.cluster.context.link_delays.clear()
        self.cluster.context.faults.clear()
        self.cluster.context.clear_disk_faults()
        self.network.heal()
        for broker_id in sorted(self.down):
            await self._stop_halted(broker_id)
        for broker_id in sorted(self.down):
            await self._restart(broker_id)

    # -- the sampler and the end -------------------------------------------------------------

    async def _sample(self) -> None:
        """Every broker's replicas and controller state, written down when they change."""
        last: dict[tuple, tuple] = {}
        while True:
            for broker in list(self.cluster.brokers.values()):
                if not broker.running:
                    continue
                rm = broker.replica_manager
                controller = broker.controller
                state = (controller is not None,
                         controller.epoch if controller is not None else -1, rm.controller_epoch)
                if last.get(("c", broker.broker_id)) != state:
                    last[("c", broker.broker_id)] = state
                    self.history.record("controller", broker=broker.broker_id, active=state[0],
                                        epoch=state[1], accepted=state[2])
                for (topic, index), p in sorted(rm.partitions.items()):
                    state = (p.is_leader, p.leader_epoch, p.high_watermark, p.log_end_offset,
                             tuple(sorted(p.isr)))
                    key = (broker.broker_id, topic, index)
                    if last.get(key) != state:
                        last[key] = state
                        self.history.record(
                            "replica", broker=broker.broker_id, partition=f"{topic}-{index}",
                            leader=state[0], epoch=state[1], hw=state[2], leo=state[3],
                            isr=state[4])
            await asyncio.sleep(SAMPLE_EVERY_MS / 1000)

    async def _wait_until_healed(self) -> str:
        """'' once every replica of every partition is in sync with its leader and no
        transaction is open on the workload's topic (its last stable offset at the high
        watermark); else, at the deadline, what is still wrong."""
        deadline = self.now_ms() + HEAL_TIMEOUT_MS
        probe = self._checker()
        try:
            while True:
                wrong = self._out_of_sync() or await self._unstable(probe)
                if not wrong or self.now_ms() >= deadline:
                    return wrong
                await asyncio.sleep(0.2)
        finally:
            probe.view.close()

    def _out_of_sync(self) -> str:
        brokers = self.cluster.brokers
        for broker_id, broker in sorted(brokers.items()):
            if not broker.running:
                return f"broker {broker_id} is not running"
        for broker_id, broker in sorted(brokers.items()):
            for (topic, index), p in sorted(broker.replica_manager.partitions.items()):
                if not p.is_leader:
                    continue
                where = f"{topic}-{index} (leader {broker_id}, epoch {p.leader_epoch})"
                if set(p.isr) != set(p.replicas):
                    return f"{where} has ISR {sorted(p.isr)} of {sorted(p.replicas)}"
                if p.high_watermark != p.log_end_offset:
                    return (f"{where} has high watermark {p.high_watermark} below its log end "
                            f"offset {p.log_end_offset}")
                for r in p.replicas:
                    replica = brokers[r].replica_manager.partitions.get((topic, index))
                    if replica is None or replica.log_end_offset != p.log_end_offset:
                        return (f"{where}: broker {r}'s log ends at "
                                f"{replica.log_end_offset if replica else 'nothing'}, "
                                f"the leader's at {p.log_end_offset}")
        return ""

    async def _unstable(self, probe: Reader) -> str:
        for partition in range(self.spec.partitions):
            probe.partition = partition
            probe.view.leaders.clear()
            fetched = await probe.fetch(1, 0)
            if fetched is None:
                return f"{self.spec.topic}-{partition} cannot be read"
            if fetched.last_stable_offset != fetched.high_watermark:
                return (f"{self.spec.topic}-{partition} has a transaction open: last stable "
                        f"offset {fetched.last_stable_offset}, high watermark "
                        f"{fetched.high_watermark}")
        return ""

    def _checker(self, topic: str | None = None) -> Reader:
        """The checker's own client: a reader of `topic` (the workload's), partition 0 until
        told another."""
        return Reader("checker", self.network, self.history, sorted(self.cluster.configs),
                      random.Random(self.seed), self.spec, self.wall_ms, partition=0,
                      topic=topic)

    async def _read_back(self) -> tuple[dict[int, FinalLog], dict[int, str]]:
        """Each partition of the workload's topic read back both ways, and the compacted
        topic's partition as a consumer reads it."""
        reader = self._checker()
        final: dict[int, FinalLog] = {}
        for partition in range(self.spec.partitions):
            reader.partition = partition
            final[partition] = FinalLog(await reader.read_all(0), await reader.read_all(1))
        reader.view.close()
        reader = self._checker(self.spec.compacted_topic)
        compacted = await reader.read_all(0)
        reader.view.close()
        return final, compacted
