"""KafkaServer: one Kafka broker of a cluster — its listener, logs, ReplicaManager, purgatories,
metadata cache, group coordinator, and (when elected) the controller; Kafka's KafkaServer.

Start-up recovers the logs, opens the listener, registers the broker in the metadata store (an
ephemeral node, as in ZooKeeper) and runs for controller. stop() leaves as a crashed broker would
for the rest of the cluster (its node vanishes with its session) while still answering parked
requests, flushing and checkpointing locally.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker import admin, authorizer, share
from broker.config import BrokerConfig, Listener
from broker.controller.controller import Controller
from broker.coordinator import group as consumer_groups
from broker.coordinator import share as share_states
from broker.coordinator import transaction as transactions
from broker.handlers.services import BrokerServices
from broker.logs import get_logger
from broker.metadata import zk_paths as paths
from broker.metadata.broker_registration import registration
from broker.metadata.client_quota_configs import ClientQuotaConfigs
from broker.metadata.dynamic_broker_configs import DynamicBrokerConfigs, topic_defaults
from broker.metadata.group_configs import GroupConfigCache
from broker.metadata.metadata_cache import MetadataCache, MetadataSnapshot
from broker.metadata.partition_state import LeaderAndIsr
from broker.metadata.producer_id_manager import ProducerIdManager
from broker.metadata.replica_assignment import ReplicaAssignment
from broker.metadata.store import (
    RETRY_BACKOFF_S,
    BadVersionError,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    WatchedEvent,
)
from broker.metadata.topic_config_cache import TopicConfigCache
from broker.metadata.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from broker.network.connection import Connection
from broker.network.connection_quotas import ConnectionQuotas
from broker.network.idle_sweeper import IdleSweeper
from broker.network.memory_pool import RequestMemoryPool
from broker.network.request_metrics import RequestMetrics
from broker.quota.quota_managers import QuotaManagers
from broker.replication import purgatory_view
from broker.replication.replica_manager import ReplicaManager, ReplicationSettings
from broker.security.listener_security import ListenerSecurity
from broker.security.scram_credentials import ScramCredentialStore
from broker.server.worker_steps import run_steps_in_worker
from protocol.errors import ErrorCode, KafkaError
from storage.log_dir_failure_channel import KafkaStorageError, LogDirFailureChannel, OfflineLogDir
from storage.log_flusher import LogFlusher
from storage.log_manager import LogManager
from timer.scheduler import NEVER_MS, KafkaScheduler

if TYPE_CHECKING:
    from broker.admin.admin_manager import AdminManager
    from broker.admin.auto_topic_creation import AutoTopicCreationManager
    from broker.authorizer.acl_authorizer import AclAuthorizer
    from broker.coordinator.group.coordinator import GroupCoordinator
    from broker.coordinator.share.share_coordinator import ShareCoordinator
    from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from broker.replication.leader_endpoint import LeaderEndpoint
    from broker.replication.partition import Partition
    from broker.server.cluster_context import ClusterContext
    from broker.share.share_partition_manager import SharePartitionManager
    from storage.log_config import LogConfig

log = get_logger("kafka_sim.broker")
SHUTDOWN_GRACE_S = 5.0
TLS_HANDSHAKE_TIMEOUT_S = 60.0  # asyncio's default; connections.max.idle.ms when shorter
# A LeaderAndIsr with more new logs than this has them made in a worker thread first (~1 ms of
# file system calls each); a few are made on the loop, the request applied at once.
LOGS_MADE_ON_THE_LOOP = 16



class LogDirFailedAtStart(ValueError):
    """Every log dir of the broker failed while its logs were loaded: it does not start (a
    ValueError: the control API answers it as a state conflict, the CLI as a start-up error).
    With one dir left, it starts and that dir's partitions are offline."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def broker_wall_clock(clock: object) -> Callable[[], int]:
    """The epoch-ms reading retention, roll, group and transaction times use: the cluster's
    virtual clock's when it has one (so `ctl clock advance` moves them), real time otherwise."""
    return getattr(clock, "wall_ms", wall_clock_ms)


def authorizer_from_config(config: BrokerConfig, store: MetadataStore) -> AclAuthorizer | None:
    """The authorizer `authorizer.class.name` asks for, its module imported only then; None
    (everything allowed) when it is empty."""
    if not config["authorizer.class.name"].strip():
        return None
    return authorizer.acl_authorizer.AclAuthorizer.from_config(config, store)


class KafkaServer:
    def __init__(self, config: BrokerConfig, context: ClusterContext) -> None:
        self.config = config
        self.context = context
        self.broker_id = config.broker_id
        self.clock = context.clock
        self.wall_ms = broker_wall_clock(context.clock)
        self.store = context.store
        self.cluster_id = context.cluster_id
        for log_dir in config.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir_failure_channel = LogDirFailureChannel()
        self.log_dir_failure_channel.add_listener(self._on_log_dir_offline)
        self.log_manager = LogManager(
            config.log_dirs, config.log_config(), now_ms=self.wall_ms,
            producer_id_expiration_ms=config["producer.id.expiration.ms"],
            disk=context.disk_faults_for(self.broker_id),
            failure_channel=self.log_dir_failure_channel,
            max_open_files=config["log.segment.open.files.max"],
            flusher=LogFlusher(threaded=not context.inline_io,
                               on_error=self._on_flush_error))
        self.metadata_cache = MetadataCache(context.timer)
        # Topic configs for the controller's requests over the wire, which carry none.
        # Client quotas: the stored ones at start, then each change the notifications name
        self.client_quota_configs = ClientQuotaConfigs(self.store)
        self.quotas = QuotaManagers(config, context.timer, context.clock.now_ms)
        self.group_configs = GroupConfigCache(config, self.store)
        self.dynamic_configs = DynamicBrokerConfigs(self.store, self.broker_id,
                                                    self._on_dynamic_configs_change)
        self.topic_configs = TopicConfigCache(self.store, self._on_topic_config_change,
                                              self._on_entity_change)
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, context.timer, context.clock,
            alter_isr=self._alter_isr,
            leader_endpoint=self._leader_endpoint,
            settings=ReplicationSettings(
                config["replica.lag.time.max.ms"],
                config["replica.fetch.wait.max.ms"],
                config["replica.fetch.max.bytes"],
                config["max.incremental.fetch.session.cache.slots"],
                config["simulation.defect"] == "high-watermark-ignores-isr",
            ),
            known_partition=lambda topic, index: (
                self.metadata_cache.partition_state(topic, index) is not None),
            topic_id_of=self.metadata_cache.topic_id_of,
        )  # fmt: skip
        self.producer_ids = ProducerIdManager(self.store, self.broker_id)
        self.marker_transport = context.marker_transport(self)
        # Built on first use (the properties below): a broker that no client asks for groups,
        # transactions or topic admin never imports them; their timers start with the broker.
        self._admin_manager: AdminManager | None = None
        self._auto_topic_creation: AutoTopicCreationManager | None = None
        self._group_coordinator: GroupCoordinator | None = None
        self._transaction_coordinator: TransactionCoordinator | None = None
        self._share_partition_manager: SharePartitionManager | None = None
        self._share_coordinator: ShareCoordinator | None = None
        self._coordinators_started = False
        self.authorizer = authorizer_from_config(config, self.store)
        self.services = BrokerServices(
            self.broker_id, self.cluster_id, config, self.metadata_cache, self.replica_manager,
            self, self.producer_ids, self.advertised_address, self, self.authorizer,
            scram_credentials=ScramCredentialStore(self.store),
            client_quota_configs=self.client_quota_configs, quotas=self.quotas,
            txn_transport=self.marker_transport, dynamic_configs=self.dynamic_configs)
        self.controller: Controller | None = None
        self.session: int | None = None
        self._servers: list[asyncio.Server] = []
        self._connections: dict[asyncio.Task, Connection] = {}
        self.request_metrics = RequestMetrics()
        self.request_memory_pool = RequestMemoryPool(config["queued.max.request.bytes"])
        self.idle_sweeper = IdleSweeper(config["connections.max.idle.ms"] / 1000)
        self.connection_quotas = ConnectionQuotas(
            config["max.connections"], config["max.connections.per.ip"],
            config["max.connections.per.ip.overrides"])
        self._background: list[asyncio.Task] = []
        # The periodic jobs, on the shared timer: the cluster's clock drives them
        self.scheduler = KafkaScheduler(context.timer, lambda job, exc: log.error(
            "background job failed", job=job, exc_info=exc))
        # Bound addresses per listener name (port 0 is resolved at start); the first is `address`.
        self.addresses: dict[str, tuple[str, int]] = {
            x.name: (x.host, x.port) for x in config.listeners}
        self.security: dict[str, ListenerSecurity] = {}  # per listener name, made at start
        self.running = False
        self._halt_task: asyncio.Future | None = None
        self._session_task: asyncio.Future | None = None  # registering again after an expiry
        self._election: asyncio.Future | None = None  # running for controller after a change
        self._failed_dirs: set[str] = set()  # log dirs whose failure was handled
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def address(self) -> tuple[str, int]:
        return next(iter(self.addresses.values()))

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def listeners(self) -> str:
        """The bound listeners in `listeners` form (to come back on the same ports)."""
        return ",".join(str(Listener(n, h, p)) for n, (h, p) in self.addresses.items())

    def advertised_endpoints(self) -> dict[str, tuple[str, int]]:
        """What clients of each listener are told to connect to."""
        advertised = self.config.advertised_listeners
        return {name: advertised.get(name, bound) for name, bound in self.addresses.items()}

    def advertised_address(self, listener: str | None = None) -> tuple[str, int]:
        endpoints = self.advertised_endpoints()
        return endpoints.get(listener or "", next(iter(endpoints.values())))

    # -- built on first use -------------------------------------------------------------------
    # A coordinator is built at the latest when LeaderAndIsr names a partition of its topic
    # (apply_leader_and_isr), so it loads that partition as it would have at start.

    @property
    def admin_manager(self) -> AdminManager:
        if self._admin_manager is None:
            self._admin_manager = admin.admin_manager.AdminManager(
                self.config, self.store, self.metadata_cache)
        return self._admin_manager

    @property
    def auto_topic_creation(self) -> AutoTopicCreationManager:
        if self._auto_topic_creation is None:
            self._auto_topic_creation = admin.auto_topic_creation.AutoTopicCreationManager(
                self.config, self.admin_manager, self.metadata_cache)
        return self._auto_topic_creation

    @property
    def group_coordinator(self) -> GroupCoordinator:
        if self._group_coordinator is None:
            self._group_coordinator = consumer_groups.coordinator.GroupCoordinator(
                self.config, self.broker_id, self.context.timer, self.replica_manager,
                self.metadata_cache, self.wall_ms, self.group_configs)
            if self._coordinators_started:
                self._group_coordinator.schedule_retention()
        return self._group_coordinator

    @property
    def share_partition_manager(self) -> SharePartitionManager:
        if self._share_partition_manager is None:
            persister = share.share_state_persister.SharePersister(
                self.metadata_cache, self.marker_transport,
                lambda: self.auto_topic_creation.ensure_share_state_topic())
            self._share_partition_manager = share.share_partition_manager.SharePartitionManager(
                self.config, self.replica_manager, self.context.timer, self.group_configs,
                persister)
        return self._share_partition_manager

    @property
    def share_coordinator(self) -> ShareCoordinator:
        if self._share_coordinator is None:
            self._share_coordinator = share_states.share_coordinator.ShareCoordinator(
                self.config, self.broker_id, self.replica_manager, self.metadata_cache,
                self.wall_ms)
        return self._share_coordinator

    def share_partition_views(self, group_id: str | None = None) -> list[dict]:
        """The share partitions this broker leads, as the views show them (none until a share
        consumer fetched here)."""
        if self._share_partition_manager is None:
            return []
        return share.view.share_partition_views(self._share_partition_manager, self.broker_id,
                                                self.context.timer.clock.now_ms(), group_id)

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        if self._transaction_coordinator is None:
            coordinator = transactions.transaction_coordinator.TransactionCoordinator
            self._transaction_coordinator = coordinator(
                self.config, self.broker_id, self.context.timer, self.replica_manager,
                self.metadata_cache, self.producer_ids.generate_producer_id,
                transactions.transaction_marker_channel.TransactionMarkerChannel(
                    self.marker_transport, self.metadata_cache), self.wall_ms,
                sync_producer_ids=self.producer_ids.store.flush)
            if self._coordinators_started:
                self._transaction_coordinator.startup()
        return self._transaction_coordinator

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        # Key stores, trust stores and JAAS settings are read first: a bad one stops nothing.
        self.security = {name: ListenerSecurity.from_config(self.config, name, self.store,
                                                            self.clock, self.context.timer)
                         for name in self.addresses}
        try:
            # Loading reads (and after a crash rewrites) every log's files: a worker thread does
            # it, so that the other brokers of an embedded cluster keep being served meanwhile.
            await asyncio.to_thread(self.log_manager.load)
            # What recovery kept is fsynced by the flusher: wait for it off the loop, so that a
            # disk failing those fsyncs keeps the broker from starting, as a failed load does.
            await asyncio.to_thread(self.log_manager.flusher.drain)
            if not self.log_manager.online_dirs():
                raise KafkaStorageError("every log dir is offline")
        except KafkaStorageError as exc:
            for name in self.log_manager.dirs:
                self.log_manager.handle_log_dir_failure(name)
            offline = self.log_dir_failure_channel.offline_log_dirs()
            reason = offline[0].reason if offline else exc.message
            raise LogDirFailedAtStart(f"broker {self.broker_id} cannot start: {reason}") from exc
        # A dir that failed while loading: its partitions are offline here (LeaderAndIsr answers
        # KAFKA_STORAGE_ERROR for them, so the controller elects leaders elsewhere), the rest serve.
        for offline in self.log_dir_failure_channel.offline_log_dirs():
            self._failed_dirs.add(offline.path)
            log.error("log dir offline at start", broker_id=self.broker_id, log_dir=offline.path,
                      reason=offline.reason)
            self.replica_manager.offline_partitions |= set(
                self.log_manager.handle_log_dir_failure(offline.path))
        self.replica_manager.offline_partitions |= self.log_manager.offline_at_load
        for problem in self.log_manager.load_problems:
            log.warning("checkpoint row skipped", broker_id=self.broker_id, problem=problem)
        hosted = sorted({topic for topic, _ in self.log_manager.all_logs()})
        known = await self.store.get_many([paths.topic(topic) for topic in hosted])
        deleted = {topic for topic, got in zip(hosted, known, strict=True) if got is None}
        for topic, partition in list(self.log_manager.all_logs()):
            if topic in deleted:  # deleted while we were down
                self.log_manager.delete_log(topic, partition)
        if self.authorizer is not None:
            await self.authorizer.start()  # its cache is loaded before the first request is read
        for name, (host, port) in list(self.addresses.items()):
            # The TLS handshake runs inside the loop's transport, a few bytes at a time (never
            # blocking it); one that fails or stalls (connections.max.idle.ms, at most 60 s)
            # closes that connection before serve_connection. (StreamWriter.start_tls after the
            # connection quotas would count it sooner, but stalls under uvloop.)
            ssl_context = self.security[name].ssl_context
            # Bound now (its port is known), served only once the broker is registered: as
            # Kafka's enableRequestProcessing, no request sees a cluster without this broker.
            server = await asyncio.start_server(
                functools.partial(self.serve_connection, name), host, port, ssl=ssl_context,
                start_serving=False,
                ssl_handshake_timeout=min(TLS_HANDSHAKE_TIMEOUT_S, self.config[
                    "connections.max.idle.ms"] / 1000) if ssl_context is not None else None)
            self._servers.append(server)
            self.addresses[name] = server.sockets[0].getsockname()[:2]
        self.running = True
        self.context.running_brokers[self.broker_id] = self
        self.store.add_session_listener(self._on_session_change)
        await self.topic_configs.start()
        await self.dynamic_configs.load()
        await self.quotas.load(self.client_quota_configs)
        await self._register()
        for server in self._servers:
            await server.start_serving()
        config, schedule = self.config, self.scheduler.schedule
        # Kafka's isr-expiration task
        schedule("isr-expiration", self.replica_manager.maybe_shrink_isr,
                 max(1, config["replica.lag.time.max.ms"] // 2))
        schedule("log-flusher", self.log_manager.flush_all, config["log.flush.interval.ms"])
        schedule("highwatermark-checkpoint", self._checkpoint_in_background,
                 config["replica.high.watermark.checkpoint.interval.ms"])
        schedule("log-cleaner", self._clean_logs, config["log.cleaner.backoff.ms"]
                 if config["log.cleaner.enable"] else NEVER_MS)
        schedule("log-retention", self.log_manager.cleanup,
                 config["log.retention.check.interval.ms"])
        schedule("producer-expiration", self.log_manager.remove_expired_producers,
                 config["producer.id.expiration.check.interval.ms"])
        self._coordinators_started = True
        if self._group_coordinator is not None:
            self._group_coordinator.schedule_retention()
        if self._transaction_coordinator is not None:
            self._transaction_coordinator.startup()
        await self._run_for_controller()
        log.info("broker started", broker_id=self.broker_id, host=self.address[0],
                 port=self.address[1], log_dirs=",".join(self.log_manager.dirs))

    async def stop(self, *, crash: bool = False) -> None:
        """Leave the cluster as a crashed broker would, then close down locally. With `crash`, as
        a killed process: nothing more is flushed or checkpointed (the next start recovers the
        logs), and the store ends the broker's session only after zookeeper.session.timeout.ms,
        as ZooKeeper notices a dead client."""
        if not self.running:
            return
        self.running = False
        for server in self._servers:
            server.close()
        if crash:  # a killed process answers nothing more
            for task in self._connections:
                task.cancel()
        self.context.running_brokers.pop(self.broker_id, None)
        self.topic_configs.stop()
        if self.controller is not None:
            await self.controller.stop()
            self.controller = None
        if self.session is not None:
            session, self.session = self.session, None
            if crash:
                asyncio.get_running_loop().call_later(
                    self.config["zookeeper.session.timeout.ms"] / 1000,
                    lambda: asyncio.ensure_future(self.store.close_session(session)))
            else:
                await self.store.close_session(session)  # our nodes vanish; watchers react
        for task in (self._session_task, self._election):
            if task is not None:
                task.cancel()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self.scheduler.shutdown(), return_exceptions=True)
        self._coordinators_started = False
        if self._group_coordinator is not None:
            self._group_coordinator.shutdown()
        if self._transaction_coordinator is not None:
            self._transaction_coordinator.shutdown()
        if self._share_partition_manager is not None:
            self._share_partition_manager.shutdown()
        if self._share_coordinator is not None:
            self._share_coordinator.shutdown()
        close = getattr(self.marker_transport, "close", None)
        if close is not None:
            close()
        await self.replica_manager.shutdown()
        await self._close_connections()
        self.idle_sweeper.close()
        if self.authorizer is not None:
            self.authorizer.close()
        if crash:
            self.log_manager.crash()
        else:
            # Every log's last writes and fsyncs, then the checkpoints and the clean-shutdown
            # marker, in a worker thread (nothing else uses the logs any more): the loop never
            # waits on them.
            await asyncio.to_thread(self.log_manager.shutdown)
        log.info("broker stopped", broker_id=self.broker_id)

    # -- a failed log dir (Kafka's ReplicaManager.handleLogDirFailure) ---------------------------

    def _on_log_dir_offline(self, offline: OfflineLogDir) -> None:
        """The failure channel's listener: it runs inside the failing log call (possibly in a
        worker thread), so the handling is only scheduled here."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._schedule_log_dir_failure, offline)

    def _schedule_log_dir_failure(self, offline: OfflineLogDir) -> None:
        if not self.running or offline.path in self._failed_dirs:
            return  # one that failed while loading is handled by start()
        self._failed_dirs.add(offline.path)
        partitions = self.replica_manager.handle_log_dir_failure(offline.path)
        # Logs there not hosted yet (loaded, no LeaderAndIsr so far) are offline too: never
        # created afresh in another dir while their data sits on the failed one.
        self.replica_manager.offline_partitions |= set(
            self.log_manager.handle_log_dir_failure(offline.path))
        for topic, partition in partitions:  # the coordinators stop serving what went offline
            self._coordinator_follows(topic, partition, False)
        if self.log_manager.online_dirs():
            log.error("log dir offline", broker_id=self.broker_id, log_dir=offline.path,
                      reason=offline.reason, partitions=len(partitions))
            self._background.append(asyncio.ensure_future(self._propagate_log_dir_event()))
        elif self._halt_task is None:
            # Not among the background tasks: stop() cancels those, and this one calls stop().
            self._halt_task = asyncio.ensure_future(self._halt(offline))

    async def _propagate_log_dir_event(self) -> None:
        """Tell the controller (Kafka's /log_dir_event_notification sequence node): it asks this
        broker about all its replicas and elects leaders elsewhere for the offline ones."""
        try:
            await self.store.create_json(f"{paths.LOG_DIR_EVENTS}/{paths.LOG_DIR_EVENT_PREFIX}",
                                   {"version": 1, "broker": self.broker_id,
                                    "event": paths.LOG_DIR_FAILURE_EVENT}, sequence=True)
        except MetadataStoreError as exc:
            log.warning("log dir event not written", broker_id=self.broker_id, reason=str(exc))

    async def _halt(self, offline: OfflineLogDir) -> None:
        """The last log dir failed: halt as Kafka does, a crash for the cluster, no controlled
        shutdown, nothing more written there, and the next start recovers the logs."""
        log.error(f"Shutdown broker because all log dirs in {', '.join(self.log_manager.dirs)} "
                  "have failed", broker_id=self.broker_id, reason=offline.reason)
        await self.stop()
        if self.context.on_broker_halt is not None:
            self.context.on_broker_halt(self.broker_id)

    async def _close_connections(self) -> None:
        if not self._connections:
            return
        # Parked requests have answered; give their writes a moment, then cut the rest.
        _, pending = await asyncio.wait(list(self._connections), timeout=0.05)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=SHUTDOWN_GRACE_S)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), SHUTDOWN_GRACE_S)

    def _on_flush_error(self, exc: BaseException) -> None:
        """A fsync or checkpoint write failed in the flusher's thread (an I/O error has taken the
        log dir offline already: the failure channel's listener handles that)."""
        log.error("log flush failed", broker_id=self.broker_id, error=repr(exc))

    async def _checkpoint_in_background(self) -> None:
        """Checkpoint files are fsynced: write them in a thread so the loop never waits on disk."""
        snapshot = self.log_manager.checkpoint_snapshot()
        await asyncio.to_thread(self.log_manager.write_checkpoints, snapshot)

    async def _clean_logs(self) -> int:
        """A log cleaner pass: reading and writing in a worker thread, the swaps on the loop."""
        return await run_steps_in_worker(self.log_manager.clean_logs_stepwise())

    async def serve_connection(
        self, listener: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Serve one client connection of `listener` until it closes (its listening socket's
        callback; the simulation calls it with in-memory streams)."""
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername") or ("?", 0)
        ip = str(peer[0])
        refused = self.connection_quotas.try_acquire(ip)
        if refused is not None:  # Kafka's TooManyConnectionsException: closed before any read
            log.warning("connection refused", broker_id=self.broker_id, listener=listener,
                        peer=f"{peer[0]}:{peer[1]}", reason=refused)
            writer.close()
            return
        security = self.security[listener]
        try:
            connection = Connection(self.services, self.context.faults, reader, writer, listener,
                                    security if security.protocol != "PLAINTEXT" else None,
                                    metrics=self.request_metrics,
                                    memory_pool=self.request_memory_pool,
                                    idle_sweeper=self.idle_sweeper)
            self._connections[task] = connection
            await connection.serve()
        except asyncio.CancelledError:
            pass  # shutdown cut this connection; finishing quietly keeps asyncio from logging it
        finally:
            self._connections.pop(task, None)
            self.connection_quotas.release(ip)

    def connections(self) -> list[Connection]:
        """The open client connections (and inter-broker ones) of every listener."""
        return list(self._connections.values())

    def purgatory_stats(self) -> dict:
        """Per purgatory of this broker: watched keys, delayed, completed, expired."""
        rm, groups = self.replica_manager, self.group_coordinator
        return {"fetch": purgatory_view.stats(rm.fetch_purgatory), "produce": purgatory_view.stats(rm.produce_purgatory),
                "delete_records": purgatory_view.stats(rm.delete_records_purgatory),
                "heartbeat": purgatory_view.stats(groups.heartbeat_purgatory),
                "rebalance": purgatory_view.stats(groups.join_purgatory),
                "throttle": self.quotas.stats()}

    def metrics(self) -> dict:
        """What `GET /metrics` reports of this broker: its purgatories, request counts and times,
        replica counts and fetch sessions."""
        rm = self.replica_manager
        leaders = [p for p in rm.partitions.values() if p.is_leader]
        return {
            "purgatory": self.purgatory_stats(),
            "requests": self.request_metrics.snapshot(),
            "fetch_record_bytes": {"sendfile": self.request_metrics.bytes_sent_from_files,
                                   "copied": self.request_metrics.bytes_copied_from_files},
            "partitions": len(rm.partitions),
            "leaders": len(leaders),
            "under_replicated": sum(1 for p in leaders if len(p.isr) < len(p.replicas)),
            "under_min_isr": sum(1 for p in leaders
                                 if len(p.isr) < p.log.config.min_insync_replicas),
            "offline_replicas": len(rm.offline_partitions),
            "active_controller": self.controller is not None,
            "fetch_sessions": rm.fetch_manager.stats(),
        }

    # -- registration and controller election -----------------------------------------------

    async def _register(self) -> None:
        """This broker's ephemeral /brokers/ids/N, in Kafka's JSON (version 5); host and port are
        the inter-broker listener's."""
        self.session = self.store.create_session()
        try:
            await self.store.create_json(paths.broker(self.broker_id), registration(
                self.advertised_endpoints(), self.config.inter_broker_listener_name, self.wall_ms(),
                self.config.security_protocols,
            ), ephemeral=True, session=self.session)
        except NodeExistsError:
            # As Kafka's broker, refuse to start rather than take over another session's node; a
            # restart right after kill -9 meets the dead process's node until its session expires.
            raise NodeExistsError(
                f"broker {self.broker_id} is already registered at {paths.broker(self.broker_id)} by "
                "another ZooKeeper session: a broker with this id is running, or one that crashed "
                "has not yet timed out (zookeeper.session.timeout.ms)") from None

    async def expire_session(self) -> None:
        """The store ends this broker's session, as ZooKeeper expires one it has not heard from:
        its ephemeral nodes vanish (the controller takes it for dead, and a controller it ran
        steps down), then it registers again in a new session (`kafka-sim simulate`'s fault)."""
        if not self.running or self.session is None:
            return
        session, self.session = self.session, None
        await self.store.close_session(session)
        self._on_session_change("LOST")
        self._on_session_change("CONNECTED")

    def _on_session_change(self, state: str) -> None:
        """The store's session expired ("LOST": our ephemeral nodes are gone, so the cluster takes
        us for dead and another broker may be controller) or a new one is live ("CONNECTED"):
        register again and run for controller, as a Kafka broker does after a ZooKeeper expiry."""
        if not self.running:
            return
        if state == "LOST":
            if self.controller is not None:
                controller, self.controller = self.controller, None
                self._background.append(asyncio.ensure_future(controller.stop()))
            return
        if self._session_task is not None:
            self._session_task.cancel()
        self._session_task = asyncio.ensure_future(self._retried(
            "registration in the new session", self._rejoin))

    async def _rejoin(self) -> None:
        # (the node of the expired session may outlive it a moment: NodeExistsError, again)
        await self._register()
        await self._run_for_controller()

    async def _retried(self, what: str, step: Callable[[], Awaitable[None]]) -> None:
        """`step` until it is done, tried again after a backoff while the store cannot see it
        through (this broker serves its partitions meanwhile)."""
        backoff = RETRY_BACKOFF_S[0]
        while self.running:
            try:
                await step()
                return
            except MetadataStoreError as exc:
                log.warning(f"{what} failed; retrying", broker_id=self.broker_id, reason=str(exc))
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_S[1])

    async def _run_for_controller(self) -> None:
        """Whoever creates the ephemeral /controller node first is the controller."""
        while self.running:
            try:
                await self.store.create_json(paths.CONTROLLER, {
                    "version": 1, "brokerid": self.broker_id, "timestamp": str(self.wall_ms()),
                }, ephemeral=True, session=self.session)
            except NodeExistsError:
                if await self.store.exists(paths.CONTROLLER, watch=self._on_controller_change):
                    return
                continue  # it vanished between the two calls: try again
            epoch = await self._bump_controller_epoch()
            if not self.running or self.controller is not None:
                return
            self.controller = Controller(self.context.config, self.store, self.context.timer,
                                         self.context.controller_channel, self.broker_id, epoch)
            self.controller.start()
            return

    def _on_controller_change(self, event: WatchedEvent) -> None:
        # Deleted: run. Anything else (a change, a new session): run too, which re-arms the watch
        # when someone else still holds /controller. (Unreachable: the watch is not armed; again.)
        if self.running and self.controller is None and (
                self._election is None or self._election.done()):
            self._election = asyncio.ensure_future(self._retried(
                "controller election", self._run_for_controller))

    async def _bump_controller_epoch(self) -> int:
        while True:
            try:
                data, stat = await self.store.get(paths.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    await self.store.create(paths.CONTROLLER_EPOCH, b"1")
                    return 1
                except NodeExistsError:
                    continue
            epoch = int(data) + 1
            try:
                await self.store.set(paths.CONTROLLER_EPOCH, str(epoch).encode(),
                                     version=stat.version)
                return epoch
            except BadVersionError:
                continue

    # -- what the controller tells this broker (LeaderAndIsr, UpdateMetadata, StopReplica): direct
    # calls from the controller channel, each fenced by the controller epoch

    def _check_controller_epoch(self, controller_epoch: int) -> None:
        if controller_epoch < self.replica_manager.controller_epoch:
            raise KafkaError(ErrorCode.STALE_CONTROLLER_EPOCH,
                             f"controller epoch {controller_epoch} is older than "
                             f"{self.replica_manager.controller_epoch}")
        self.replica_manager.controller_epoch = controller_epoch

    def logs_made_off_the_loop(self, states: list[LeaderAndIsr], configs: dict[str, LogConfig]
                               ) -> list:
        """The logs applying these states would create, when they are more than
        LOGS_MADE_ON_THE_LOOP (then made in a worker thread first); else none."""
        wanted = self.replica_manager.logs_to_create(states, configs)
        return wanted if len(wanted) > LOGS_MADE_ON_THE_LOOP else []

    async def apply_leader_and_isr(
        self, controller_epoch: int, states: list[LeaderAndIsr], configs: dict[str, LogConfig]
    ) -> dict[tuple[str, int], ErrorCode]:
        """LeaderAndIsr: the new partitions' logs are made in a worker thread (a folder and files
        each: thousands would hold the loop for seconds), then the states applied on the loop."""
        self._check_controller_epoch(controller_epoch)
        wanted = self.logs_made_off_the_loop(states, configs)
        if wanted:
            await run_steps_in_worker(self.log_manager.create_logs_stepwise(wanted))
        return self.apply_leader_and_isr_now(controller_epoch, states, configs)

    def apply_leader_and_isr_now(
        self, controller_epoch: int, states: list[LeaderAndIsr], configs: dict[str, LogConfig]
    ) -> dict[tuple[str, int], ErrorCode]:
        self._check_controller_epoch(controller_epoch)
        errors = self.replica_manager.become_leader_or_follower(states, configs)
        if self._dynamic_log_defaults():  # the controller's configs lack this broker's dynamic
            topics = self.metadata_cache.topics  # ones (a topic not known yet: UpdateMetadata)
            self.log_manager.update_configs({s.topic: self.log_config_for(topics[s.topic].configs)
                                             for s in states if s.topic in topics})
        for state in states:  # the coordinators follow the partitions of their topics it leads
            if errors.get((state.topic, state.partition)) == 0:
                self._coordinator_follows(state.topic, state.partition,
                                          state.leader == self.broker_id, state.leader_epoch)
        return errors

    def _coordinator_follows(self, topic: str, partition: int, is_leader: bool,
                             leader_epoch: int = -1) -> None:
        """A coordinator's topic partition that this broker now leads or no longer leads."""
        if topic == OFFSETS_TOPIC:
            self.group_coordinator.on_leadership(partition, is_leader)
        elif topic == TRANSACTION_STATE_TOPIC:
            self.transaction_coordinator.on_leadership(partition, is_leader, leader_epoch)
        elif topic == SHARE_STATE_TOPIC:
            self.share_coordinator.on_leadership(partition, is_leader)

    def apply_update_metadata(self, snapshot: MetadataSnapshot) -> None:
        self._check_controller_epoch(snapshot.controller_epoch)
        before = self.metadata_cache.snapshot.topics
        for name in before.keys() - snapshot.topics.keys():  # deleted: a new one is read afresh
            self.topic_configs.forget(name)
        dynamic = bool(self._dynamic_log_defaults())
        for name, topic in snapshot.topics.items():  # AlterConfigs, restarts: configs apply at once
            old = before.get(name)
            # (a new topic's logs were made with the controller's configs: add the dynamic ones)
            if (old.configs if old is not None else {}) != topic.configs or (
                    old is None and dynamic):
                self.log_manager.update_config(name, self.log_config_for(topic.configs))
        self.metadata_cache.update(snapshot)

    # -- dynamic broker configs ---------------------------------------------------------------

    def _dynamic_log_defaults(self) -> dict[str, str]:
        return topic_defaults(self.dynamic_configs.values())

    def log_config_for(self, overrides: dict[str, str]) -> LogConfig:
        """A topic's log config here: its overrides over the dynamic log settings (this broker's,
        else the cluster default's) over the static ones."""
        return self.config.log_config({**self._dynamic_log_defaults(), **overrides})

    def _on_dynamic_configs_change(self) -> None:
        """Dynamic broker configs changed: every log takes the log settings among them."""
        configs = {name: self.log_config_for(topic.configs)
                   for name, topic in self.metadata_cache.topics.items()}
        self.log_manager.update_configs(configs)
        log.info("dynamic broker configs applied", broker_id=self.broker_id,
                 configs=self.dynamic_configs.values())

    def _on_entity_change(self, entity_path: str):
        """A config change notification not about a topic: a group's, this broker's (or every
        broker's) dynamic configs, or a client quota's."""
        if self.group_configs.on_notification(entity_path):
            return None
        if self.dynamic_configs.concerns(entity_path):
            return self.dynamic_configs.load()
        return self.quotas.on_notification(self.client_quota_configs, entity_path)

    def apply_stop_replica(
        self, controller_epoch: int, keys: list[tuple[str, int]], *, delete: bool
    ) -> None:
        self._check_controller_epoch(controller_epoch)
        self.replica_manager.stop_replicas(keys, delete=delete)
        for topic, partition in keys:
            self._coordinator_follows(topic, partition, False)

    def _active_controller(self) -> Controller:
        if self.controller is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id} is not the controller")
        return self.controller

    async def controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        return await self._active_controller().controlled_shutdown(broker_id)

    async def elect_leaders(self, keys: list[tuple[str, int]], *, unclean: bool
                            ) -> dict[tuple[str, int], int | KafkaError]:
        return await self._active_controller().elect_leaders(keys, unclean=unclean)

    async def alter_partition_reassignments(
        self, reassignments: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]:
        return await self._active_controller().alter_partition_reassignments(reassignments)

    async def list_partition_reassignments(self, keys: list[tuple[str, int]] | None
                                           ) -> dict[tuple[str, int], ReplicaAssignment]:
        return await self._active_controller().list_partition_reassignments(keys)

    async def topic_config_overrides(self, topics: list[str]) -> dict[str, dict[str, str]]:
        """Topics' config overrides (requests over the wire carry none): read from the store
        once per topic, then kept current by /config/changes notifications."""
        return await self.topic_configs.overrides(topics)

    def _on_topic_config_change(self, topic: str, overrides: dict[str, str]) -> None:
        """A notification changed a topic's overrides: its logs and this broker's metadata take
        them now (the controller's UpdateMetadata may have come before the notification)."""
        self.log_manager.update_config(topic, self.log_config_for(overrides))
        snapshot = self.metadata_cache.snapshot
        info = snapshot.topics.get(topic)
        if info is not None and info.configs != overrides:
            topics = {**snapshot.topics, topic: dataclasses.replace(info, configs=overrides)}
            self.metadata_cache.update(dataclasses.replace(snapshot, topics=topics))

    # -- replication hooks ------------------------------------------------------------------

    def _leader_endpoint(self, leader_id: int) -> LeaderEndpoint:
        return self.context.leader_endpoint(self, leader_id)

    async def _alter_isr(self, partition: Partition, new_isr: list[int]) -> LeaderAndIsr | None:
        """Write a leader's ISR change (conditional on the partition version), tell the controller.
        None when the change did not happen (lost a race, stopping, the store unreachable): the
        leader keeps its ISR and tries again on a later fetch or expiration check."""
        if not self.running:
            return None
        path = paths.partition_state(partition.topic, partition.index)
        try:
            return await self._write_isr(partition, path, new_isr)
        except MetadataStoreError as exc:
            log.warning("ISR change not written", broker_id=self.broker_id, topic=partition.topic,
                        partition=partition.index, reason=str(exc))
            return None

    async def _write_isr(self, partition: Partition, path: str, new_isr: list[int]
                         ) -> LeaderAndIsr | None:
        try:
            data, stat = await self.store.get_json(path)
        except NoNodeError:
            return None
        if stat.version != partition.partition_version or data["leader_epoch"] != partition.leader_epoch:
            return None  # the controller moved on; its LeaderAndIsr will tell us
        data["isr"] = new_isr
        try:
            stat = await self.store.set_json(path, data, version=stat.version)
        except BadVersionError:
            return None
        try:  # the change is made: a lost notification only delays the controller's view
            await self.store.create_json(f"{paths.ISR_CHANGES}/isr_change_",
                                         {"partitions": [[partition.topic, partition.index]]},
                                         sequence=True)
        except MetadataStoreError as exc:
            log.warning("ISR change notification not written", broker_id=self.broker_id,
                        topic=partition.topic, partition=partition.index, reason=str(exc))
        log.info("ISR changed", broker_id=self.broker_id, topic=partition.topic,
                 partition=partition.index, isr=new_isr, partition_version=stat.version)
        return LeaderAndIsr(partition.topic, partition.index, partition.leader_id,
                            partition.leader_epoch, new_isr, partition.replicas, stat.version)
