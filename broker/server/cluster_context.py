"""ClusterContext: what the brokers of one embedded cluster share, and the in-process controller
channel that delivers the controller's requests to them by direct calls."""

from __future__ import annotations

import asyncio
import base64
import gc
import itertools
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from broker import replication
from broker.config import BrokerConfig
from broker.control.faults import FaultAction, FaultInjector
from broker.controller.controller_channel import PartitionErrors
from broker.coordinator import transaction as transactions
from broker.handlers import HANDLERS
from broker.handlers.services import BrokerServices
from broker.logs import get_logger
from broker.metadata import zk_paths as paths
from broker.metadata.store import MetadataStore, NodeExistsError, NoNodeError
from broker.server.loop_monitor import LoopMonitor
from storage.disk_faults import DiskFaults
from timer import Clock, ExpiredOperationReaper, SystemTimer, VirtualClock

if TYPE_CHECKING:
    from broker.coordinator.transaction.transaction_marker_channel import MarkerTransport, TxnMarker
    from broker.metadata.metadata_cache import MetadataCache, MetadataSnapshot
    from broker.metadata.partition_state import LeaderAndIsr
    from broker.replication.leader_endpoint import LeaderEndpoint
    from broker.replication.replica_manager import ReplicaManager
    from storage.log_config import LogConfig

from protocol.errors import ErrorCode, KafkaError

log = get_logger("kafka_sim.cluster_context")


class RunningBroker(Protocol):
    """What the cluster's in-process channels use of a running broker (a KafkaServer)."""

    broker_id: int
    running: bool
    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    services: BrokerServices

    def logs_made_off_the_loop(self, states: list[LeaderAndIsr], configs: dict[str, LogConfig]
                               ) -> list: ...

    async def apply_leader_and_isr(self, controller_epoch: int, states: list[LeaderAndIsr],
                                   configs: dict[str, LogConfig]
                                   ) -> dict[tuple[str, int], ErrorCode]: ...

    def apply_leader_and_isr_now(self, controller_epoch: int, states: list[LeaderAndIsr],
                                 configs: dict[str, LogConfig]
                                 ) -> dict[tuple[str, int], ErrorCode]: ...

    def apply_update_metadata(self, snapshot: MetadataSnapshot) -> None: ...

    def apply_stop_replica(self, controller_epoch: int, keys: list[tuple[str, int]], *,
                           delete: bool) -> None: ...


class ClusterContext:
    """What the brokers of one cluster share: config, store, clock, timer, reaper, faults, and who
    is running (the in-process controller channel and leader endpoints look brokers up here)."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.timer = SystemTimer(clock)
        self.reaper = ExpiredOperationReaper(self.timer, clock)
        self.running_brokers: dict[int, RunningBroker] = {}
        self.faults = FaultInjector()
        # Per broker id, so that an armed disk fault outlives the broker it halted (a disk stays
        # full across a restart until someone frees it).
        self.disk_faults: dict[int, DiskFaults] = {}
        self._disk_fault_ids = itertools.count(1)
        # Called with a broker's id when it halted on a failed log dir (Kafka's Exit.halt).
        self.on_broker_halt: Callable[[int], None] | None = None
        self.controller_channel = InProcessControllerChannel(self)
        self.cluster_id = ""  # read (or made) by start()
        self.loop_monitor = LoopMonitor()
        # The simulation runs on one thread: fsyncs and checkpoints are written in place, the
        # loop's watchdog is not started, and the in-process links can be cut.
        self.inline_io = False
        self.cut_links: set[frozenset[int]] = set()  # broker pairs that cannot reach each other
        self.link_delays: dict[frozenset[int], float] = {}  # broker pair -> seconds one way

    async def start(self) -> None:
        """Before the first broker starts: the store's persistent roots and the cluster id, the
        reaper and the event loop's monitor."""
        for root in paths.PERSISTENT_ROOTS:
            await self.store.ensure_path(root)
        self.cluster_id = await self._cluster_id(self.config["cluster.id"])
        self.reaper.start()
        if not self.inline_io:
            self.loop_monitor.start()

    async def stop(self) -> None:
        """Once every broker has stopped."""
        await self.reaper.stop()
        self.timer.shutdown()
        await self.loop_monitor.stop()

    def event_loop(self) -> dict:
        """The loop's lag over the last minute (max and p99, ms), for the console and /metrics."""
        monitor = self.loop_monitor
        return {**monitor.lag().to_dict(), "held_warnings": monitor.held_warnings,
                "gc_max_pause_ms": round(monitor.gc_max_pause_ms, 1),
                "gc_frozen": gc.get_freeze_count()}

    async def _cluster_id(self, configured: str) -> str:
        try:
            data, _ = await self.store.get_json(paths.CLUSTER_ID)
            return data["id"]
        except NoNodeError:
            # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding.
            cluster_id = configured or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            try:
                await self.store.create_json(paths.CLUSTER_ID, {"version": "1", "id": cluster_id},
                                             makepath=True)
            except NodeExistsError:
                return (await self.store.get_json(paths.CLUSTER_ID))[0]["id"]
            return cluster_id

    def disk_faults_for(self, broker_id: int) -> DiskFaults:
        """The faults armed on broker `broker_id`'s log dir (its LogManager's segments consult them)."""
        disk = self.disk_faults.get(broker_id)
        if disk is None:
            disk = self.disk_faults[broker_id] = DiskFaults(self._disk_fault_ids)
        return disk

    def list_disk_faults(self) -> list[dict]:
        return [{"broker": broker_id, **fault.to_dict()}
                for broker_id, disk in sorted(self.disk_faults.items()) for fault in disk.list()]

    def clear_disk_faults(self, fault_id: int | None = None, broker_id: int | None = None) -> int:
        return sum(disk.clear(fault_id) for b, disk in self.disk_faults.items()
                   if broker_id is None or b == broker_id)

    # -- the virtual clock (`kafka-sim ctl clock`) ---------------------------------------------

    def _virtual_clock(self) -> VirtualClock:
        if not isinstance(self.clock, VirtualClock):
            raise ValueError(f"this cluster runs on a {type(self.clock).__name__}, "
                             "not a virtual clock: it cannot be frozen or advanced from here")
        return self.clock

    def clock_state(self) -> dict:
        """Frozen or running, the broker time (monotonic and wall) and its offset from real time,
        and the brokers that follow this clock (all of this process's)."""
        return {**self._virtual_clock().state().to_dict(),
                "brokers": sorted(self.running_brokers)}

    def freeze_clock(self) -> dict:
        self._virtual_clock().freeze()
        return self.clock_state()

    def resume_clock(self) -> dict:
        self._virtual_clock().resume()
        return self.clock_state()

    def advance_clock(self, ms: int) -> dict:
        """Move time `ms` forward and run what came due before answering, so the caller sees
        expired sessions and timed-out requests already handled (what they spawn goes on after)."""
        self._virtual_clock().advance(ms)
        self.timer.advance_clock(self.clock.now_ms())
        return self.clock_state()

    def running(self, broker_id: int) -> RunningBroker | None:
        return self.running_brokers.get(broker_id)

    def reachable(self, a: int, b: int) -> bool:
        """Whether broker `a` can reach broker `b` (a simulated network partition cuts pairs)."""
        return not self.cut_links or frozenset((a, b)) not in self.cut_links

    def leader_endpoint(self, follower: RunningBroker, leader_id: int) -> LeaderEndpoint:
        """How `follower` fetches from broker `leader_id`: its ReplicaManager, called directly."""
        def lookup() -> ReplicaManager | None:
            leader = self.running(leader_id)
            if leader is None or not follower.running:
                return None
            return (leader.replica_manager if self.reachable(follower.broker_id, leader_id)
                    else None)

        link = frozenset((follower.broker_id, leader_id))
        return replication.leader_endpoint.InProcessLeaderEndpoint(
            lookup, lambda: self.link_delays.get(link, 0.0))

    def marker_transport(self, coordinator: RunningBroker) -> MarkerTransport:
        """How `coordinator`'s transaction coordinator reaches partition leaders: direct calls."""
        return InProcessMarkerTransport(self, coordinator)


WRITE_TXN_MARKERS = 27
# The share coordinator's requests: the function of their handler's module that answers them
SHARE_STATE_ANSWERS = {83: "initialize_states", 84: "read_states", 85: "write_states",
                       86: "delete_states"}


class InProcessMarkerTransport:
    """WriteTxnMarkers as a direct call into the leader's handler, as the in-process controller
    channel calls brokers; a broker that is not running is unreachable. The leader's faults for
    WriteTxnMarkers apply as they would to the request over TCP (disconnect, dropped response,
    delay, error), so tests can hold a transaction between its prepare and its markers."""

    def __init__(self, context: ClusterContext, coordinator: RunningBroker) -> None:
        self._context = context
        self._coordinator = coordinator

    async def write_txn_markers(self, broker_id: int,
                                markers: list[TxnMarker]) -> list[dict[tuple[str, int], ErrorCode]]:
        leader = self._context.running(broker_id)
        if leader is None or not leader.running or not self._coordinator.running:
            raise ConnectionError(f"broker {broker_id} is not running")
        if not self._context.reachable(self._coordinator.broker_id, broker_id):
            raise ConnectionError(f"broker {broker_id} cannot be reached")
        request = {"markers": [marker.to_wire() for marker in markers]}
        fault = self._context.faults.match(broker_id, WRITE_TXN_MARKERS, request)
        if fault is not None:
            if fault.action is FaultAction.DISCONNECT:
                raise ConnectionError(f"fault {fault.id}: broker {broker_id} disconnected")
            if fault.action is FaultAction.ERROR:
                return [dict.fromkeys(m.partitions, ErrorCode(fault.error_code)) for m in markers]
            if fault.action is FaultAction.DELAY:
                await asyncio.sleep((fault.delay_ms or 0) / 1000)
        written = await HANDLERS[WRITE_TXN_MARKERS].handler_module().write_txn_markers(
            leader.services, request["markers"])
        results = transactions.transaction_marker_channel.marker_results(written)
        if fault is not None and fault.action is FaultAction.DROP_RESPONSE:
            raise ConnectionError(f"fault {fault.id}: broker {broker_id} dropped the response")
        return results


    async def verify_txn_partitions(self, broker_id: int, transactional_id: str,
                                    producer_id: int, producer_epoch: int,
                                    partitions: set[tuple[str, int]], add: bool = False,
                                    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890 verification (or transactions v2's add) as a direct call on the coordinator
        broker's coordinator."""
        coordinator = self._context.running(broker_id)
        if coordinator is None or not coordinator.running or not self._coordinator.running:
            raise ConnectionError(f"broker {broker_id} is not running")
        txn_coordinator = coordinator.services.transaction_coordinator
        if add:
            return dict.fromkeys(partitions, await txn_coordinator.handle_add_partitions(
                transactional_id, producer_id, producer_epoch, partitions,
                client_transaction_version=2))
        return txn_coordinator.verify_partitions(transactional_id, producer_id, producer_epoch,
                                                 partitions)

    async def share_state(self, broker_id: int, api_key: int, body: dict) -> dict:
        """Initialize/Read/Write/DeleteShareGroupState as a direct call on the share
        coordinator's broker."""
        target = self._context.running(broker_id)
        if target is None or not target.running or not self._coordinator.running:
            raise ConnectionError(f"broker {broker_id} is not running")
        answer = getattr(HANDLERS[api_key].handler_module(), SHARE_STATE_ANSWERS[api_key])
        return await answer(target.services, body)


class InProcessControllerChannel:
    """The controller's requests as direct calls on the running brokers (a stopped one is skipped,
    as a controller skips a broker that left; one refusing a stale epoch raises KafkaError).

    A request is applied at once unless it has to wait: a LeaderAndIsr naming many partitions whose
    logs are new has them made in a worker thread first, and what comes for that broker meanwhile
    is applied after it, in order (as a broker's request queue would)."""

    def __init__(self, context: ClusterContext) -> None:
        self._context = context
        self._pending: dict[int, deque[Callable[[RunningBroker], Awaitable[None] | None]]] = {}

    def update_brokers(self, addresses: dict[int, tuple[str, int]]) -> None:
        """Brokers of this process are reached by id: nothing to keep."""

    def _deliver(self, broker_id: int,
                 apply: Callable[[RunningBroker], Awaitable[None] | None]) -> None:
        pending = self._pending.get(broker_id)
        if pending is not None:
            pending.append(apply)
            return
        broker = self._context.running(broker_id)
        if broker is None:
            return
        waiting = apply(broker)
        if waiting is not None:
            self._pending[broker_id] = deque()
            asyncio.ensure_future(self._apply_pending(broker_id, waiting))

    async def _apply_pending(self, broker_id: int, waiting: Awaitable[None]) -> None:
        pending = self._pending[broker_id]
        try:
            while True:
                try:
                    await waiting
                except KafkaError as exc:
                    log.warning("controller request refused", broker_id=broker_id,
                                error=exc.code.name)
                waiting = None
                while waiting is None and pending:
                    broker = self._context.running(broker_id)
                    apply = pending.popleft()
                    if broker is not None:
                        try:
                            waiting = apply(broker)
                        except KafkaError as exc:
                            log.warning("controller request refused", broker_id=broker_id,
                                        error=exc.code.name)
                if waiting is None:
                    return
        finally:
            del self._pending[broker_id]

    def send_leader_and_isr(self, broker_id: int, controller_epoch: int,
                            states: list[LeaderAndIsr], configs: dict[str, LogConfig],
                            on_response: PartitionErrors | None = None) -> None:
        def apply(broker: RunningBroker) -> Awaitable[None] | None:
            if broker.logs_made_off_the_loop(states, configs):
                async def with_new_logs() -> None:
                    errors = await broker.apply_leader_and_isr(controller_epoch, states, configs)
                    if on_response is not None:
                        on_response(errors)
                return with_new_logs()
            errors = broker.apply_leader_and_isr_now(controller_epoch, states, configs)
            if on_response is not None:
                on_response(errors)
            return None

        self._deliver(broker_id, apply)

    def send_update_metadata(self, broker_id: int, snapshot: MetadataSnapshot) -> None:
        self._deliver(broker_id, lambda broker: broker.apply_update_metadata(snapshot))

    def send_stop_replica(self, broker_id: int, controller_epoch: int,
                          keys: list[tuple[str, int]], *, delete: bool,
                          on_response: PartitionErrors | None = None) -> None:
        def apply(broker: RunningBroker) -> None:
            broker.apply_stop_replica(controller_epoch, keys, delete=delete)
            if on_response is not None:
                on_response(dict.fromkeys(keys, ErrorCode.NONE))

        self._deliver(broker_id, apply)
