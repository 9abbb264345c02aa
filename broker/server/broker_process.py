"""BrokerProcess: one broker of a multi-process cluster (`kafka-sim run -o zookeeper.connect=...`),
coordinated through a real ZooKeeper as a ZooKeeper-mode Kafka broker is.

Beside the embedded cluster it swaps three pieces, each behind the interface the embedded one
uses: the metadata store is ZooKeeper, the controller's requests go over TCP, and followers fetch
from leaders over TCP. It is also this process's `ClusterControl`: the control API of each broker
process shows the whole cluster as ZooKeeper has it and acts on this broker alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from broker.config import BrokerConfig
from broker.control.faults import FaultInjector
from broker.coordinator import group as consumer_groups
from broker.coordinator import transaction as transactions
from broker.interbroker.controlled_shutdown import controlled_shutdown
from broker.interbroker.tcp_controller_channel import TcpControllerChannel
from broker.interbroker.tcp_leader_endpoint import TcpLeaderEndpoint
from broker.interbroker.tcp_txn_marker_transport import TcpTxnMarkerTransport
from broker.logs import get_logger
from broker.metadata import zk_paths as paths
from broker.metadata.broker_registration import registered_address
from broker.metadata.store import MetadataStore, NoNodeError
from broker.metadata.zookeeper_store import ZooKeeperMetadataStore
from broker.replication.leader_endpoint import LeaderEndpoint
from broker.security.client_security import ClientSecurity
from broker.security.scram_credentials import ScramCredentialStore
from broker.server.cluster import write_meta_properties
from broker.server.cluster_context import ClusterContext, RunningBroker
from broker.server.kafka_server import KafkaServer
from timer import Clock, VirtualClock
from timer import view as timer_view

log = get_logger("kafka_sim.broker_process")


class ZooKeeperContext(ClusterContext):
    """A cluster context whose brokers are other processes: TCP for the controller's requests,
    followers' fetches and transaction markers."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, clock: Clock) -> None:
        super().__init__(config, store, clock)
        # TLS and SASL settings for other brokers' inter-broker listener, read once
        self.client_security = ClientSecurity.inter_broker(config)
        self.controller_channel = TcpControllerChannel(config.broker_id, self.client_security)

    def leader_endpoint(self, follower: RunningBroker, leader_id: int) -> LeaderEndpoint:
        return TcpLeaderEndpoint(follower.broker_id, leader_id,
                                 lambda: follower.metadata_cache.brokers.get(leader_id),
                                 self.client_security)

    def marker_transport(self, coordinator: RunningBroker) -> TcpTxnMarkerTransport:
        return TcpTxnMarkerTransport(coordinator.broker_id,
                                     lambda b: coordinator.metadata_cache.brokers.get(b),
                                     self.client_security)


class BrokerProcess:
    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.store = ZooKeeperMetadataStore(
            config["zookeeper.connect"],
            session_timeout_ms=config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=config["zookeeper.connection.timeout.ms"])
        self.clock = clock or VirtualClock()
        self.context: ZooKeeperContext | None = None
        self.broker: KafkaServer | None = None
        # Set when the broker halted on a failed log dir: the process then exits non-zero.
        self.halted = asyncio.Event()

    @property
    def faults(self) -> FaultInjector:
        assert self.context is not None
        return self.context.faults

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None
        return f"{self.broker.address[0]}:{self.broker.port}"

    async def start(self) -> None:
        await self.store.start()
        self.context = ZooKeeperContext(self.config, self.store, self.clock)
        self.context.on_broker_halt = lambda _: self.halted.set()
        await self.context.start()
        await self.start_broker(self.broker_id)
        log.info("broker process started", broker_id=self.broker_id,
                 zookeeper=self.config["zookeeper.connect"], cluster_id=self.context.cluster_id)

    async def stop(self) -> None:
        """Stop this broker process (SIGTERM, Ctrl-C): a controlled shutdown first, as Kafka's."""
        if self.broker is not None and self.broker.running:
            if self.config["controlled.shutdown.enable"]:
                cache = self.broker.metadata_cache
                await controlled_shutdown(
                    lambda: cache.brokers.get(cache.controller_id), self.broker_id,
                    retries=self.config["controlled.shutdown.max.retries"],
                    backoff_ms=self.config["controlled.shutdown.retry.backoff.ms"],
                    security=self.context.client_security if self.context else None)
            await self.broker.stop()
        if self.context is not None:
            await self.context.controller_channel.close()
            await self.context.stop()
        await self.store.close()

    # -- ClusterControl: this broker acts, the cluster is shown as ZooKeeper has it ---------------

    def _this(self, broker_id: int) -> KafkaServer:
        if broker_id != self.broker_id:
            if self.broker is not None and broker_id in self.broker.metadata_cache.brokers:
                raise ValueError(f"broker {broker_id} runs in another process: use its control "
                                 "API (kafka-sim ctl --url ...)")
            raise KeyError(f"no broker {broker_id} in this process")
        assert self.broker is not None
        return self.broker

    async def start_broker(self, broker_id: int) -> None:
        if broker_id != self.broker_id:
            self._this(broker_id)
        if self.broker is not None and self.broker.running:
            raise ValueError(f"broker {broker_id} is already running")
        assert self.context is not None
        config = self.config
        if self.broker is not None:  # come back on the same port
            config = config.with_overrides({"listeners": self.broker.listeners})
        write_meta_properties(config.log_dirs, self.context.cluster_id, broker_id)
        if not self.store.session_id:  # stopped: its session went with it
            await self.store.start()
        self.broker = KafkaServer(config, self.context)
        await self.broker.start()

    async def stop_broker(self, broker_id: int) -> None:
        broker = self._this(broker_id)
        if not broker.running:
            raise ValueError(f"broker {broker_id} is already stopped")
        await broker.stop()

    async def brokers_info(self) -> list[dict]:
        controller_id, epoch = -1, 0
        with contextlib.suppress(NoNodeError):
            controller_id = (await self.store.get_json(paths.CONTROLLER))[0]["brokerid"]
        with contextlib.suppress(NoNodeError):
            epoch = int((await self.store.get(paths.CONTROLLER_EPOCH))[0])
        out = []
        for child in await self.store.get_children(paths.BROKER_IDS):
            broker_id = int(child)
            address = await registered_address(self.store, broker_id)
            if address is None:
                continue
            out.append({"id": broker_id, "host": address[0], "port": address[1], "alive": True,
                        "controller": broker_id == controller_id, "controller_epoch": epoch})
        if self.broker is not None and not self.broker.running:  # this one, stopped
            out.append({"id": self.broker_id, "host": self.broker.address[0],
                        "port": self.broker.port, "alive": False, "controller": False,
                        "controller_epoch": epoch})
        return sorted(out, key=lambda b: b["id"])

    async def partitions(self, topic: str | None = None) -> list[dict]:
        """Partition states from ZooKeeper; replica LEO/HW/lag and producers where this broker
        leads (only a leader knows its followers' positions)."""
        broker = self.broker
        out = []
        names = [topic] if topic is not None else await self.store.get_children(paths.TOPICS)
        for name in sorted(names):
            try:
                data, _ = await self.store.get_json(paths.topic(name))
            except NoNodeError:
                if topic is not None:
                    raise KeyError(f"no topic {name!r}") from None
                continue
            indexed = sorted((int(p), r) for p, r in data["partitions"].items())
            states = await self.store.get_many([paths.partition_state(name, i) for i, _ in indexed])
            for (index, replicas), got in zip(indexed, states, strict=True):
                if got is None:
                    continue
                state = json.loads(got[0])
                local = broker.replica_manager.partitions.get((name, index)) \
                    if broker is not None and broker.running else None
                leads = local is not None and local.is_leader
                out.append({"topic": name, "partition": index, "leader": state["leader"],
                            "leader_epoch": state["leader_epoch"], "isr": state["isr"],
                            "replicas": replicas,
                            # a reassignment under way (KIP-455: the topic node's fields)
                            "adding_replicas": (data.get("adding_replicas") or {}).get(str(index), []),
                            "removing_replicas":
                                (data.get("removing_replicas") or {}).get(str(index), []),
                            "replicas_state": local.replica_states() if leads else [],
                            "producers": local.log.producer_state.describe() if leads else [],
                            # the state machines live in the controller's process only
                            **(broker.controller.state_machines_view(name, index)
                               if broker is not None and broker.controller is not None else {})})
        return out

    async def elect_preferred_leaders(self) -> None:
        broker = self.broker
        if broker is None or broker.controller is None:
            raise ValueError("this broker is not the controller: use the controller's control API "
                             "(kafka-sim ctl brokers shows which one it is)")
        await broker.controller.elect_preferred_leaders()

    def add_disk_fault(self, broker_id: int, operation: str, errno: int | str, *,
                       after_bytes: int | None = None, after_ops: int | None = None,
                       files: list[str] | None = None, log_dir: str | None = None) -> dict:
        self._this(broker_id)
        assert self.context is not None
        self.config.check_log_dir(log_dir)
        fault = self.context.disk_faults_for(broker_id).add(
            operation, errno, after_bytes=after_bytes, after_ops=after_ops, files=files,
            log_dir=log_dir)
        return {"broker": broker_id, **fault.to_dict()}

    def disk_faults(self) -> list[dict]:
        return self.context.list_disk_faults() if self.context is not None else []

    def clear_disk_faults(self, fault_id: int | None = None, broker_id: int | None = None) -> int:
        return self.context.clear_disk_faults(fault_id, broker_id) if self.context else 0

    # The clock is this process's: other brokers' processes keep theirs (ctl clock per --url).

    def _context(self) -> ZooKeeperContext:
        if self.context is None:
            raise ValueError("this broker process has not started")
        return self.context

    def clock_state(self) -> dict:
        return self._context().clock_state()

    def freeze_clock(self) -> dict:
        return self._context().freeze_clock()

    def advance_clock(self, ms: int) -> dict:
        return self._context().advance_clock(ms)

    def resume_clock(self) -> dict:
        return self._context().resume_clock()

    def pause_replication(self, broker_id: int) -> None:
        self._this(broker_id).replica_manager.pause_replication()

    def resume_replication(self, broker_id: int) -> None:
        self._this(broker_id).replica_manager.resume_replication()

    def purgatory(self) -> dict:
        assert self.context is not None
        running = self.broker is not None and self.broker.running
        brokers = {str(self.broker_id): self.broker.purgatory_stats()} if running else {}
        sessions = {str(self.broker_id): self.broker.replica_manager.fetch_manager.stats()} \
            if running else {}
        return {"brokers": brokers, "timer": timer_view.stats(self.context.timer),
                "fetch_sessions": sessions}

    def metrics(self) -> dict:
        assert self.context is not None
        running = self.broker is not None and self.broker.running
        return {"brokers": {str(self.broker_id): self.broker.metrics()} if running else {},
                "timer": timer_view.stats(self.context.timer), "event_loop": self.event_loop()}

    def event_loop(self) -> dict:
        return self._context().event_loop()

    def groups(self, group: str | None = None) -> list[dict]:
        broker = self.broker
        if broker is None or not broker.running:
            return []

        def high_watermark(topic: str, partition: int) -> int | None:
            local = broker.replica_manager.partitions.get((topic, partition))
            return local.high_watermark if local is not None and local.is_leader else None

        out = consumer_groups.view.coordinator_views(broker.group_coordinator, broker.broker_id,
                                                     high_watermark, group)
        if group is not None and not out:
            raise KeyError(f"no group {group!r} on this broker's coordinator")
        return sorted(out, key=lambda g: g["group"])

    @property
    def scram_credentials(self) -> ScramCredentialStore:
        """SCRAM users, as the metadata store keeps them (`kafka-sim ctl users`)."""
        return ScramCredentialStore(self.store)

    def transactions(self, transactional_id: str | None = None) -> list[dict]:
        broker = self.broker
        if broker is None or not broker.running:
            return []
        out = [transactions.view.transaction_view(t, broker.broker_id)
               for t in broker.transaction_coordinator.manager.owned_transactions()
               if transactional_id is None or t.transactional_id == transactional_id]
        if transactional_id is not None and not out:
            raise KeyError(f"no transactional id {transactional_id!r} on this broker's coordinator")
        return sorted(out, key=lambda t: t["transactional_id"])
