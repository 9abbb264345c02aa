"""Cluster: N brokers (KafkaServer) in one process on one event loop, sharing one timer, one reaper
and one metadata store — the embedded cluster `kafka-sim run` starts (3 brokers on 9092-9094 by default).

It is also the control surface (`ClusterControl`): stop and start brokers, pause replication,
inject faults, and look at partitions and purgatories.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from broker.config import BrokerConfig, Listener
from broker.control.faults import FaultInjector
from broker.coordinator import group as consumer_groups
from broker.coordinator import transaction as transactions
from broker.logs import get_logger
from broker.metadata.embedded_store import EmbeddedMetadataStore
from broker.security.scram_credentials import ScramCredentialStore
from broker.server.cluster_context import ClusterContext
from broker.server.kafka_server import KafkaServer
from storage.checkpoint import write_text_atomically
from timer import Clock, SystemTimer, VirtualClock
from timer import view as timer_view

if TYPE_CHECKING:
    from broker.controller.controller import Controller

log = get_logger("kafka_sim.cluster")
STORE_DIR = "metadata-store"  # a snapshot and a journal (storage/metadata_image.py)
LEGACY_STORE_FILE = "metadata-store.json"  # format 1, converted into STORE_DIR on start


def broker_config(base: BrokerConfig, index: int, num_brokers: int) -> BrokerConfig:
    """Broker `index`'s config: ids and ports count up from the base, data in broker-<id>/."""
    broker_id = base.broker_id + index
    listeners = ",".join(str(Listener(x.name, x.host, x.port + index if x.port else 0))
                         for x in base.listeners)
    overrides = {
        "broker.id": str(broker_id),
        "listeners": listeners,
        "log.dirs": ",".join(str(d / f"broker-{broker_id}") for d in base.log_dirs),
    }
    if "default.replication.factor" not in base.explicit:
        overrides["default.replication.factor"] = str(min(3, num_brokers))
    return base.with_overrides(overrides)


class Cluster:
    def __init__(self, config: BrokerConfig, num_brokers: int = 3, *, clock: Clock | None = None,
                 store: EmbeddedMetadataStore | None = None) -> None:
        if num_brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        # The simulation passes an in-memory store (one thread, nothing written for it)
        self.store = store or EmbeddedMetadataStore(config.data_dir / STORE_DIR,
                                                    legacy_file=config.data_dir / LEGACY_STORE_FILE)
        self.context = ClusterContext(config, self.store, clock or VirtualClock())
        self.configs = {c.broker_id: c for c in
                        (broker_config(config, i, num_brokers) for i in range(num_brokers))}
        self.brokers: dict[int, KafkaServer] = {}  # latest instance per id, running or not

    @property
    def cluster_id(self) -> str:
        return self.context.cluster_id

    @property
    def clock(self) -> Clock:
        return self.context.clock

    @property
    def timer(self) -> SystemTimer:
        return self.context.timer

    @property
    def faults(self) -> FaultInjector:
        return self.context.faults

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{b.address[0]}:{b.port}" for b in self.brokers.values() if b.running)

    async def start(self) -> None:
        await self.context.start()
        for broker_id in self.configs:
            await self.start_broker(broker_id)
        log.info("cluster started", brokers=len(self.configs), cluster_id=self.cluster_id,
                 bootstrap=self.bootstrap_servers)

    async def stop(self) -> None:
        for broker in list(self.brokers.values()):
            await broker.stop()
        await self.context.stop()
        await asyncio.to_thread(self.store.close)  # writes what the brokers' stops queued

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def active_controller(self) -> Controller | None:
        """The controller, on whichever running broker won the election (None between two)."""
        return next((b.controller for b in self.brokers.values() if b.running and b.controller),
                    None)

    def broker(self, broker_id: int) -> KafkaServer:
        if broker_id not in self.configs:
            raise KeyError(f"no broker {broker_id}")
        return self.brokers[broker_id]

    # -- ClusterControl ---------------------------------------------------------------------

    async def start_broker(self, broker_id: int) -> None:
        if broker_id not in self.configs:
            raise KeyError(f"no broker {broker_id}")
        current = self.brokers.get(broker_id)
        if current is not None and current.running:
            raise ValueError(f"broker {broker_id} is already running")
        config = self.configs[broker_id]
        if current is not None:  # come back on the same port
            config = config.with_overrides({"listeners": current.listeners})
        # Written atomically and fsynced: in a thread, so that the brokers already up keep serving.
        await asyncio.to_thread(write_meta_properties, config.log_dirs, self.cluster_id, broker_id)
        broker = KafkaServer(config, self.context)
        self.brokers[broker_id] = broker
        try:
            await broker.start()
        except BaseException:
            # Refused after it began to serve (its crashed predecessor's registration is still
            # there, say): nothing is left half-started, and a later start may try again.
            if broker.running:
                await broker.stop()
            raise

    async def stop_broker(self, broker_id: int) -> None:
        broker = self.broker(broker_id)
        if not broker.running:
            raise ValueError(f"broker {broker_id} is already stopped")
        await broker.stop()

    async def brokers_info(self) -> list[dict]:
        epoch = self.controller_epoch()
        return [
            {"id": b.broker_id, "host": b.address[0], "port": b.port, "alive": b.running,
             "controller": b.running and b.controller is not None, "controller_epoch": epoch}
            for b in sorted(self.brokers.values(), key=lambda b: b.broker_id)
        ]

    def controller_epoch(self) -> int:
        """The active controller's epoch; between two controllers, the newest a broker knows."""
        controller = self.active_controller()
        if controller is not None:
            return controller.epoch
        return max((b.replica_manager.controller_epoch for b in self.brokers.values()), default=0)

    async def partitions(self, topic: str | None = None) -> list[dict]:
        controller = self.active_controller()
        if controller is None:
            return []
        out = []
        for (name, index), state in sorted(controller.states.items()):
            if topic is not None and name != topic:
                continue
            leader = self.context.running(state.leader)
            partition = leader.replica_manager.partitions.get((name, index)) if leader else None
            replicas_state = partition.replica_states() if partition and partition.is_leader else []
            for entry in replicas_state:  # followers know their own HW better than the leader
                follower = self.context.running(entry["broker"])
                local = follower.replica_manager.partitions.get((name, index)) if follower else None
                if local is not None and entry["broker"] != state.leader:
                    entry["high_watermark"] = local.high_watermark
            moving = controller.topics[name].replica_assignment(index)
            out.append({"topic": name, "partition": index, "leader": state.leader,
                        "leader_epoch": state.leader_epoch, "isr": state.isr,
                        "replicas": state.replicas, "adding_replicas": moving.adding,
                        "removing_replicas": moving.removing, "replicas_state": replicas_state,
                        # idempotent producers as the leader knows them (storage/producer_state.py)
                        "producers": partition.log.producer_state.describe()
                        if partition and partition.is_leader else [],
                        **controller.state_machines_view(name, index)})
        return out

    async def elect_preferred_leaders(self) -> None:
        controller = self.active_controller()
        if controller is None:
            raise ValueError("there is no controller right now")
        await controller.elect_preferred_leaders()

    def add_disk_fault(self, broker_id: int, operation: str, errno: int | str, *,
                       after_bytes: int | None = None, after_ops: int | None = None,
                       files: list[str] | None = None, log_dir: str | None = None) -> dict:
        self.broker(broker_id)
        self.configs[broker_id].check_log_dir(log_dir)
        fault = self.context.disk_faults_for(broker_id).add(
            operation, errno, after_bytes=after_bytes, after_ops=after_ops, files=files,
            log_dir=log_dir)
        return {"broker": broker_id, **fault.to_dict()}

    def disk_faults(self) -> list[dict]:
        return self.context.list_disk_faults()

    def clear_disk_faults(self, fault_id: int | None = None, broker_id: int | None = None) -> int:
        return self.context.clear_disk_faults(fault_id, broker_id)

    def clock_state(self) -> dict:
        return self.context.clock_state()

    def freeze_clock(self) -> dict:
        return self.context.freeze_clock()

    def advance_clock(self, ms: int) -> dict:
        return self.context.advance_clock(ms)

    def resume_clock(self) -> dict:
        return self.context.resume_clock()

    def pause_replication(self, broker_id: int) -> None:
        self.broker(broker_id).replica_manager.pause_replication()

    def resume_replication(self, broker_id: int) -> None:
        self.broker(broker_id).replica_manager.resume_replication()

    def purgatory(self) -> dict:
        return {
            "brokers": {str(b.broker_id): b.purgatory_stats()
                        for b in self.brokers.values() if b.running},
            "timer": timer_view.stats(self.context.timer),
            "fetch_sessions": {str(b.broker_id): b.replica_manager.fetch_manager.stats()
                               for b in self.brokers.values() if b.running},
        }

    def metrics(self) -> dict:
        return {"brokers": {str(b.broker_id): b.metrics()
                            for b in self.brokers.values() if b.running},
                "timer": timer_view.stats(self.context.timer), "event_loop": self.event_loop()}

    def event_loop(self) -> dict:
        return self.context.event_loop()

    def groups(self, group: str | None = None) -> list[dict]:
        """Groups as their coordinators hold them, share groups with their partitions' records in
        flight (KeyError for an unknown group)."""
        def high_watermark(topic: str, partition: int) -> int | None:
            controller = self.active_controller()
            state = controller.states.get((topic, partition)) if controller else None
            leader = self.context.running(state.leader) if state is not None else None
            local = leader.replica_manager.partitions.get((topic, partition)) if leader else None
            return local.high_watermark if local is not None else None

        running = [b for b in self.brokers.values() if b.running]
        out = [view for b in running
               for view in consumer_groups.view.coordinator_views(
                   b.group_coordinator, b.broker_id, high_watermark, group)]
        for view in out:
            if view["type"] == "share":  # its records in flight, at the partitions' leaders
                view["share_partitions"] = sorted(
                    (p for b in running for p in b.share_partition_views(view["group"])),
                    key=lambda p: (p["topic"], p["partition"]))
        if group is not None and not out:
            raise KeyError(f"no group {group!r} on a running coordinator")
        return sorted(out, key=lambda g: g["group"])


    @property
    def scram_credentials(self) -> ScramCredentialStore:
        """SCRAM users, as the metadata store keeps them (`kafka-sim ctl users`)."""
        return ScramCredentialStore(self.store)

    def transactions(self, transactional_id: str | None = None) -> list[dict]:
        """Transactional ids as their coordinators hold them (KeyError for an unknown id)."""
        out = [transactions.view.transaction_view(t, b.broker_id)
               for b in self.brokers.values() if b.running
               for t in b.transaction_coordinator.manager.owned_transactions()
               if transactional_id is None or t.transactional_id == transactional_id]
        if transactional_id is not None and not out:
            raise KeyError(f"no transactional id {transactional_id!r} on a running coordinator")
        return sorted(out, key=lambda t: t["transactional_id"])


def write_meta_properties(log_dirs: Path | list[Path], cluster_id: str, broker_id: int) -> None:
    """Kafka's meta.properties in each log dir: what cluster and which broker it belongs to. A dir
    that cannot be written is left to the broker's start (its log dir goes offline there)."""
    dirs = [log_dirs] if isinstance(log_dirs, Path) else log_dirs
    text = f"version=1\ncluster.id={cluster_id}\nnode.id={broker_id}\n"
    for data_dir in dirs:
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            path = data_dir / "meta.properties"
            if not path.exists() or path.read_text() != text:
                write_text_atomically(path, text)
        except OSError:
            if len(dirs) == 1:
                raise
