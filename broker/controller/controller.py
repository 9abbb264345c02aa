"""The controller: one per cluster, one task draining an event queue, so its state needs no locks.

Events come from watches on the metadata store (brokers joining and leaving, topics created or
marked for deletion, ISR changes reported by leaders). The controller elects leaders from the ISR
(unclean election off by default), bumps leader epochs, writes partition states conditionally,
and tells brokers their roles (LeaderAndIsr) and the cluster's shape (UpdateMetadata) through a
`ControllerChannel` (controller_channel.py). Every decision carries its `controller_epoch`; brokers
refuse older ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from broker.controller.controller_channel import ControllerChannel
from broker.controller.controller_events import (
    CHILD_CHANGES,
    AlterPartitionReassignments,
    AutoPreferredReplicaElection,
    BrokerChange,
    ChildChange,
    ControlledShutdown,
    ControllerEvent,
    ControllerRequest,
    ElectLeaders,
    IsrChangeNotification,
    ListPartitionReassignments,
    LogDirEventNotification,
    PartitionModifications,
    PreferredReplicaElection,
    ReplicasOffline,
    Startup,
    StopReplicaResponse,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
)
from broker.controller.pacing import REQUEST_CHUNK, serve_others
from broker.controller.partition_reassignment import PartitionReassignment
from broker.controller.partition_state_machine import PartitionState, PartitionStateMachine
from broker.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from broker.controller.topic_deletion_manager import TopicDeletionManager
from broker.logs import get_logger
from broker.metadata import zk_paths as paths
from broker.metadata.broker_registration import registered_endpoints
from broker.metadata.metadata_cache import MetadataSnapshot, TopicInfo
from broker.metadata.partition_state import LeaderAndIsr
from broker.metadata.recipes import DataWatch
from broker.metadata.replica_assignment import ReplicaAssignment
from broker.metadata.store import (
    RETRY_BACKOFF_S,
    BadVersionError,
    ConnectionLossError,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    Stat,
    WatchedEvent,
    json_bytes,
)
from broker.metadata.topic_names import INTERNAL_TOPICS
from protocol.errors import ErrorCode, KafkaError
from timer.scheduler import KafkaScheduler

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from timer import SystemTimer

log = get_logger("kafka_sim.controller")


# Partition states are read and written in the store STORE_BATCH at a time (one batched call:
# pipelined round trips with ZooKeeper), and handed to brokers in LeaderAndIsr requests of
# LEADER_AND_ISR_CHUNK partitions, the loop served in between: thousands of store round trips, or
# of logs created by one LeaderAndIsr (~1.5-2.5 ms each), held every connection (a Kafka broker
# does that work on its controller and request handler threads; here it runs on the event loop).
# A batch of 100 new partitions' states costs the loop ~25-40 ms (their state machine moves and
# store writes); 200 let a client wait over 100 ms while 10,000 were created.
STORE_BATCH = 100
LEADER_AND_ISR_CHUNK = 50

class Controller(PartitionReassignment):
    def __init__(self, config: BrokerConfig, store: MetadataStore, timer: SystemTimer,
                 channel: ControllerChannel, broker_id: int, epoch: int) -> None:
        self.config = config
        self.store = store
        self.timer = timer
        self.channel = channel
        self.broker_id = broker_id
        self.epoch = epoch
        self.live_brokers: set[int] = set()
        self.shutting_down: set[int] = set()  # brokers in a controlled shutdown: never elected
        # Per live broker, its replicas on a failed log dir (it answered KAFKA_STORAGE_ERROR):
        # never elected, out of the ISR, until the broker registers again.
        self.offline_replicas: dict[int, set[tuple[str, int]]] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.states: dict[tuple[str, int], LeaderAndIsr] = {}
        # Kafka's partition and replica state machines (what ctl partitions shows of each)
        self.partition_states = PartitionStateMachine(timer.clock.now_ms)
        self.replica_states = ReplicaStateMachine(timer.clock.now_ms)
        self._tracked_replicas: dict[tuple[str, int], list[int]] = {}
        self.deletion = TopicDeletionManager(self, self._stop_replica_answered)
        self.queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        # Live brokers' registrations (/brokers/ids/N), read when they join: UpdateMetadata and
        # the controller channel take their endpoints from here.
        self.registrations: dict[int, dict] = {}
        # Child events queued and not yet handled: a burst of changes is one event, as the
        # one-shot watch that fired is armed again only when the event reads the children.
        self._queued_child_events: set[type[ChildChange]] = set()
        self.events_handled: Counter[str] = Counter()  # per kind (the control API, the tests)
        self._watches: list = []
        self._task: asyncio.Task | None = None
        self.scheduler = KafkaScheduler(timer)
        self._requests: set[asyncio.Future] = set()  # admin requests not yet answered
        # Set while an event waits for the metadata store: what admin requests are answered
        self.store_unreachable: KafkaError | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.queue.put_nowait(Startup())
        self._task = asyncio.create_task(self._run(), name=f"controller-{self.broker_id}")
        self._schedule_leader_rebalance()
        log.info("controller elected", broker_id=self.broker_id, controller_epoch=self.epoch)

    async def stop(self) -> None:
        self.scheduler.shutdown()
        for watch in self._watches:
            watch.cancel()
        for event in CHILD_CHANGES:
            self.store.remove_watch(event.path, self._child_watchers[event])
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for future in self._requests:  # a resigned controller answers nothing more
            if not future.done():
                future.set_exception(KafkaError(ErrorCode.NOT_CONTROLLER,
                                                f"broker {self.broker_id} is no longer the controller"))

    @functools.cached_property
    def _child_watchers(self) -> dict[type[ChildChange], Callable[[WatchedEvent], None]]:
        """One one-shot watcher per child event: it queues the event unless one is queued."""
        def watcher(event: type[ChildChange]) -> Callable[[WatchedEvent], None]:
            def on_event(_event: WatchedEvent) -> None:
                if event not in self._queued_child_events:
                    self._queued_child_events.add(event)
                    self.queue.put_nowait(event())
            return on_event
        return {event: watcher(event) for event in CHILD_CHANGES}

    async def _children(self, event: type[ChildChange]) -> list[str]:
        """The children a child event is about, its watch armed again by the read."""
        self._queued_child_events.discard(event)
        return await self.store.get_children(event.path, self._child_watchers[event])

    async def controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        """Kafka's ControlledShutdown: move leadership off a broker about to stop and take it out
        of the ISRs; answers the partitions it still leads (no other ISR member to take over)."""
        return await self._ask(lambda future: ControlledShutdown(future, broker_id))

    async def _ask(self, request: Callable[[asyncio.Future], ControllerRequest]):
        """Queue an admin request as an event (Kafka's controller event queue) and await its
        answer. While the store cannot be reached, it is refused at once (REQUEST_TIMED_OUT,
        retriable) rather than queued behind the event that waits for the store."""
        if self.store_unreachable is not None:
            raise self.store_unreachable
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._requests.add(future)
        future.add_done_callback(self._requests.discard)
        self.queue.put_nowait(request(future))
        return await future

    async def elect_leaders(self, keys: list[tuple[str, int]], *, unclean: bool
                            ) -> dict[tuple[str, int], int | KafkaError]:
        """ElectLeaders: per partition, the leader elected or why none was."""
        return await self._ask(lambda future: ElectLeaders(future, keys, unclean))

    async def alter_partition_reassignments(
        self, reassignments: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]:
        """AlterPartitionReassignments: per partition, None once the reassignment began (None as
        target replicas: cancel it), or why it did not."""
        return await self._ask(lambda future: AlterPartitionReassignments(future, reassignments))

    async def list_partition_reassignments(self, keys: list[tuple[str, int]] | None
                                           ) -> dict[tuple[str, int], ReplicaAssignment]:
        """ListPartitionReassignments: the listed (or all) partitions being reassigned."""
        return await self._ask(lambda future: ListPartitionReassignments(future, keys))

    async def elect_preferred_leaders(self) -> None:
        """Move every partition's leadership to its preferred replica where it can lead now."""
        self.queue.put_nowait(PreferredReplicaElection())
        await self.queue.join()

    def _schedule_leader_rebalance(self) -> None:
        """Kafka's auto leader rebalance task."""
        if self.config["auto.leader.rebalance.enable"]:
            self.scheduler.schedule(
                "auto-leader-rebalance",
                lambda: self.queue.put_nowait(AutoPreferredReplicaElection()),
                self.config["leader.imbalance.check.interval.seconds"] * 1000)

    async def _run(self) -> None:
        while True:
            event = await self.queue.get()
            try:
                await self._handle(event)
            finally:
                self.queue.task_done()

    async def _process(self, event: ControllerEvent) -> object:
        """What an event does (Kafka's KafkaController.process); its return answers a request."""
        match event:
            case Startup():
                return await self._on_startup()
            case BrokerChange():
                return await self._on_broker_change(await self._children(BrokerChange))
            case TopicChange():
                return await self._on_topic_change(await self._children(TopicChange))
            case TopicDeletion():
                return await self._on_topic_deletion(await self._children(TopicDeletion))
            case IsrChangeNotification():
                return await self._on_isr_change(await self._children(IsrChangeNotification))
            case LogDirEventNotification():
                return await self._on_log_dir_event(
                    await self._children(LogDirEventNotification))
            case PartitionModifications(topic=topic):
                return await self._on_partition_change(topic)
            case TopicConfigChange(topic=topic):
                return await self._on_config_change(topic)
            case ReplicasOffline(broker_id=broker_id, keys=keys):
                return await self._on_replicas_offline(broker_id, keys)
            case StopReplicaResponse(broker_id=broker_id, errors=errors):
                return await self._on_stop_replica_response(broker_id, errors)
            case PreferredReplicaElection():
                return await self._on_preferred_election(None)
            case AutoPreferredReplicaElection():
                return await self._on_auto_leader_rebalance()
            case ControlledShutdown(broker_id=broker_id):
                return await self._on_controlled_shutdown(broker_id)
            case ElectLeaders(keys=keys, unclean=unclean):
                return await self._on_elect_leaders(keys, unclean)
            case AlterPartitionReassignments(reassignments=reassignments):
                return await self._on_alter_reassignments(reassignments)
            case ListPartitionReassignments(keys=keys):
                return self._on_list_reassignments(keys)
        raise AssertionError(f"no handler for {event!r}")

    async def _handle(self, event: ControllerEvent) -> None:
        """One event; while the store cannot be reached, the same event again after a backoff
        (its handler reads what it needs afresh), the loop serving clients meanwhile. An admin
        request is answered with the error instead: its client retries."""
        request = event if isinstance(event, ControllerRequest) else None
        if request is not None and request.future.done():
            return  # refused meanwhile (the store was unreachable)
        backoff = RETRY_BACKOFF_S[0]
        while True:
            try:
                result = await self._process(event)
                self.store_unreachable = None
                self.events_handled[event.kind] += 1
                if request is not None and not request.future.done():
                    request.future.set_result(result)
                return
            except (ConnectionLossError, SessionExpiredError) as exc:
                self.store_unreachable = KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"the controller cannot reach the metadata store: {exc}")
                for future in list(self._requests):  # queued ones too: answered now
                    if not future.done():
                        future.set_exception(self.store_unreachable)
                if request is not None:
                    return
                log.warning("metadata store unreachable; controller event retried",
                            kind=event.kind, reason=str(exc), retry_in_s=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_S[1])
            except KafkaError as exc:  # an answer (a forged or stale broker id...), not a fault
                if request is None:
                    log.warning("controller event failed", kind=event.kind, error=str(exc))
                elif not request.future.done():
                    request.future.set_exception(exc)
                return
            except Exception as exc:  # one bad event must not stop the controller
                log.exception("controller event failed", kind=event.kind)
                if request is not None and not request.future.done():
                    request.future.set_exception(exc)
                return

    # -- reading and writing the store ------------------------------------------------------

    async def _read_topic(self, name: str) -> TopicInfo | None:
        return (await self._read_topics([name])).get(name)

    async def _read_topics(self, names: list[str]) -> dict[str, TopicInfo]:
        """Topics and their configs, read in batches (a failover reads every topic)."""
        out = {}
        for start in range(0, len(names), STORE_BATCH):
            chunk = names[start : start + STORE_BATCH]
            read = await self.store.get_many(
                [paths.topic(n) for n in chunk] + [paths.topic_config(n) for n in chunk])
            for name, topic, config in zip(chunk, read[: len(chunk)], read[len(chunk) :], strict=True):
                if topic is not None:
                    configs = (_json(config[0]) or {}).get("config", {}) if config else {}
                    out[name] = _topic_info(name, _json(topic[0]), configs)
        return out

    async def _read_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        try:
            data, stat = await self.store.get_json(paths.partition_state(topic, partition))
        except NoNodeError:
            return None
        return self._state_from(topic, partition, data, stat)

    def _state_from(self, topic: str, partition: int, data: dict, stat: Stat) -> LeaderAndIsr:
        return LeaderAndIsr(topic, partition, data["leader"], data["leader_epoch"], data["isr"],
                            self.topics[topic].assignment[partition], stat.version,
                            data.get("controller_epoch", 0))

    async def _read_states(self, keys: list[tuple[str, int]]) -> list[LeaderAndIsr | None]:
        read = await self.store.get_many([paths.partition_state(*k) for k in keys])
        return [self._state_from(*key, _json(got[0]), got[1]) if got is not None else None
                for key, got in zip(keys, read, strict=True)]

    def _state_body(self, state: LeaderAndIsr) -> dict:
        return {"leader": state.leader, "leader_epoch": state.leader_epoch, "isr": state.isr,
                "controller_epoch": self.epoch, "version": 1}

    async def _write_state(self, state: LeaderAndIsr) -> LeaderAndIsr:
        version = (await self.store.set_json(
            paths.partition_state(state.topic, state.partition), self._state_body(state),
            version=state.partition_version)).version
        return self._written(state, version)

    async def _update_state(self, key: tuple[str, int], leader: int, isr: list[int]
                            ) -> LeaderAndIsr:
        """Write a new leader/ISR with a bumped leader epoch, re-reading on a lost race."""
        for _ in range(3):
            current = await self._read_state(*key) or self.states[key]
            try:
                return await self._write_state(LeaderAndIsr(
                    key[0], key[1], leader, current.leader_epoch + 1, isr, current.replicas,
                    current.partition_version))
            except BadVersionError:
                continue
        raise RuntimeError(f"could not update the state of {key}")

    def _written(self, state: LeaderAndIsr, version: int) -> LeaderAndIsr:
        state = LeaderAndIsr(state.topic, state.partition, state.leader, state.leader_epoch,
                             list(state.isr), state.replicas, version, self.epoch)
        self._set_state(state, "created" if version == 0 else f"leader {state.leader} "
                        f"(epoch {state.leader_epoch})")
        return state

    def _set_state(self, state: LeaderAndIsr, reason: str) -> None:
        """The partition's state as written or read, and its partition and replica states moved
        to match (Kafka's state machines: New then Online or Offline; each replica New, then
        Online where its broker is live and its log dir works, else Offline)."""
        key = (state.topic, state.partition)
        self.states[key] = state
        partitions, replicas = self.partition_states, self.replica_states
        if partitions.state(key) is PartitionState.NON_EXISTENT:
            partitions.transition([key], PartitionState.NEW, reason)
        online = state.leader >= 0 and self._replica_online(state.leader, state)
        partitions.transition([key], PartitionState.ONLINE if online else PartitionState.OFFLINE,
                              reason)
        previous = self._tracked_replicas.get(key, ())
        replicas.forget((*key, r) for r in previous if r not in state.replicas)  # moved away
        self._tracked_replicas[key] = list(state.replicas)
        for replica in state.replicas:
            rkey = (*key, replica)
            if replicas.state(rkey) is ReplicaState.NON_EXISTENT:
                replicas.transition([rkey], ReplicaState.NEW, reason)
            replicas.transition([rkey], ReplicaState.ONLINE if self._replica_online(replica, state)
                                else ReplicaState.OFFLINE, reason)

    def state_machines_view(self, topic: str, partition: int) -> dict:
        """A partition's and its replicas' states, with the partition's last transitions (the
        control API's partitions)."""
        key = (topic, partition)
        replicas = self._tracked_replicas.get(key, [])
        return {"state": self.partition_states.state(key).value,
                "replica_states": {str(r): self.replica_states.state((*key, r)).value
                                   for r in replicas},
                "transitions": self.partition_states.history(key)}

    def _retrack(self, brokers: set[int], reason: str) -> None:
        """Brokers came or went, or lost a log dir: their replicas' states (and the partitions
        they led) follow."""
        for state in list(self.states.values()):
            if any(r in brokers for r in state.replicas):
                self._set_state(state, reason)

    async def _create_states(self, states: list[LeaderAndIsr]) -> list[LeaderAndIsr]:
        """New partitions' states, created in one batch; where another writer was first, its
        state (re-read) stands."""
        nodes = [(paths.partition_state(s.topic, s.partition), json_bytes(self._state_body(s)))
                 for s in states]
        out = []
        for state, error in zip(states, await self.store.create_many(nodes, makepath=True), strict=True):
            if error is None:
                out.append(self._written(state, 0))
                continue
            current = await self._read_state(state.topic, state.partition) \
                if isinstance(error, NodeExistsError) else None
            if current is None:
                raise error
            self._set_state(current, "read from the store")
            out.append(current)
        return out

    async def _update_states(self, changes: list[tuple[tuple[str, int], int, list[int]]]
                             ) -> list[LeaderAndIsr]:
        """_update_state for many partitions (key, leader, ISR): read and written in batches of
        STORE_BATCH; a partition whose write lost a race goes the one-by-one way."""
        out = []
        for start in range(0, len(changes), STORE_BATCH):
            if start:
                await serve_others()  # the embedded store answers without yielding
            chunk = changes[start : start + STORE_BATCH]
            currents = await self._read_states([key for key, _, _ in chunk])
            wanted = []
            for (key, leader, isr), current in zip(chunk, currents, strict=True):
                current = current or self.states[key]
                wanted.append(LeaderAndIsr(key[0], key[1], leader, current.leader_epoch + 1, isr,
                                           current.replicas, current.partition_version))
            written = await self.store.set_many(
                [(paths.partition_state(s.topic, s.partition), json_bytes(self._state_body(s)),
                  s.partition_version) for s in wanted])
            for state, result in zip(wanted, written, strict=True):
                if isinstance(result, MetadataStoreError):
                    out.append(await self._update_state((state.topic, state.partition),
                                                        state.leader, state.isr))
                else:
                    out.append(self._written(state, result.version))
        return out

    # -- elections --------------------------------------------------------------------------

    def _elect_leader(self, state: LeaderAndIsr, *, unclean: bool = False) -> tuple[int, list[int]]:
        """Offline-partition election: the first online replica (assignment order) in the ISR;
        failing that, with `unclean` (an admin's UNCLEAN election) or the topic's
        unclean.leader.election.enable, the first online replica: it leads alone."""
        live_isr = [r for r in state.isr if self._replica_online(r, state)]
        for replica in state.replicas:
            if replica in live_isr and replica not in self.shutting_down:
                return replica, live_isr
        if unclean or self.config.log_config(
                self.topics[state.topic].configs).unclean_leader_election_enable:
            live = [r for r in state.replicas if self._replica_online(r, state)]
            if live:
                return live[0], [live[0]]
        return -1, state.isr  # offline: keep the last ISR so that its return can lead again

    def _replica_online(self, replica: int, state: LeaderAndIsr) -> bool:
        """Its broker is live and its log dir has not failed (Kafka's isReplicaOnline)."""
        return replica in self.live_brokers and (
            (state.topic, state.partition) not in self.offline_replicas.get(replica, ()))

    async def _elect_for(self, keys: list[tuple[str, int]]) -> list[LeaderAndIsr]:
        changes = []
        for key in keys:
            state = self.states[key]
            leader, isr = self._elect_leader(state)
            if leader != state.leader or isr != state.isr:
                changes.append((key, leader, isr))
        return await self._update_states(changes)

    # -- telling brokers --------------------------------------------------------------------

    async def _send_leader_and_isr(self, states: list[LeaderAndIsr],
                                   only: set[int] | None = None) -> None:
        """LEADER_AND_ISR_CHUNK partitions per request, the loop served in between (a failover
        or a returning broker is told about every partition). The store's writes are made durable
        first: a broker must never act on a leader epoch a crash of the store could take back."""
        targets = self.live_brokers if only is None else self.live_brokers & only
        states = [s for s in states if any(r in targets for r in s.replicas)]
        for start in range(0, len(states), LEADER_AND_ISR_CHUNK):
            if start:
                await serve_others()  # the brokers serve their clients between two chunks
            await self.store.flush()
            self._send_leader_and_isr_chunk(states[start : start + LEADER_AND_ISR_CHUNK], only)

    def _send_leader_and_isr_chunk(self, states: list[LeaderAndIsr], only: set[int] | None) -> None:
        by_broker: dict[int, list[LeaderAndIsr]] = {}
        for state in states:
            for replica in state.replicas:
                if replica in self.live_brokers and (only is None or replica in only):
                    by_broker.setdefault(replica, []).append(state)
        configs = {name: self.config.log_config(self.topics[name].configs)
                   for name in {s.topic for s in states} if name in self.topics}
        for broker_id, broker_states in by_broker.items():
            try:
                self.channel.send_leader_and_isr(broker_id, self.epoch, broker_states, configs,
                                                 functools.partial(self._on_response, broker_id))
            except KafkaError as exc:
                log.warning("LeaderAndIsr refused", broker_id=broker_id, error=exc.code.name)

    def _on_response(self, broker_id: int, errors: dict[tuple[str, int], ErrorCode]) -> None:
        """A broker's LeaderAndIsr answer: partitions it answered KAFKA_STORAGE_ERROR for are on
        a failed log dir there (Kafka's controller marks those replicas offline)."""
        offline = {k for k, code in errors.items() if code == ErrorCode.KAFKA_STORAGE_ERROR}
        if offline - self.offline_replicas.get(broker_id, set()):
            self.queue.put_nowait(ReplicasOffline(broker_id, frozenset(offline)))

    def _send_update_metadata(self, pending: frozenset[tuple[str, int]] = frozenset()) -> None:
        """The cluster's view to every live broker. `pending` partitions (new ones whose
        LeaderAndIsr is yet to come) go without their state, so they show no leader until the
        brokers that lead them know it (Kafka sends LeaderAndIsr before UpdateMetadata)."""
        brokers, endpoints = {}, {}
        for broker_id in sorted(self.live_brokers):
            data = self.registrations.get(broker_id)
            if data is not None:
                brokers[broker_id] = (data["host"], data["port"])
                endpoints[broker_id] = registered_endpoints(data)
        states = {k: v for k, v in self.states.items() if k not in pending} if pending \
            else dict(self.states)
        offline: dict[tuple[str, int], list[int]] = {}
        for broker_id, keys in sorted(self.offline_replicas.items()):
            for key in keys:
                offline.setdefault(key, []).append(broker_id)
        snapshot = MetadataSnapshot(self.broker_id, self.epoch, brokers, dict(self.topics),
                                    states, endpoints, offline)
        for broker_id in self.live_brokers:
            try:
                self.channel.send_update_metadata(broker_id, snapshot)
            except KafkaError as exc:
                log.warning("UpdateMetadata refused", broker_id=broker_id, error=exc.code.name)

    # -- events -----------------------------------------------------------------------------

    async def _load_topics(self, names: list[str]) -> list[LeaderAndIsr]:
        """Read topics and their partition states, creating the states of new partitions, in
        batches of STORE_BATCH with the loop served in between (a topic of thousands of
        partitions is as many nodes: round trips with ZooKeeper)."""
        states: list[LeaderAndIsr] = []
        since_step = 0
        for info in (await self._read_topics(names)).values():
            async for chunk in self._load_topic_chunks(info):
                states += chunk
                since_step += len(chunk)
                if since_step >= STORE_BATCH:  # many small topics share one step
                    since_step = 0
                    await serve_others()
        return states

    async def _watch_topic(self, name: str) -> None:
        """CreatePartitions rewrites the topic node, AlterConfigs the config node (Kafka's
        /config/changes, as a data watch here): each change is an event (not the first read)."""
        changes: tuple[tuple[str, type[PartitionModifications | TopicConfigChange]], ...] = (
            (paths.topic(name), PartitionModifications),
            (paths.topic_config(name), TopicConfigChange))
        for path, event in changes:
            seen = False

            def on_data(data: bytes | None, _stat: Stat | None,
                        event: type[PartitionModifications | TopicConfigChange] = event) -> None:
                nonlocal seen
                if seen and data is not None:
                    self.queue.put_nowait(event(name))
                seen = True

            self._watches.append(await DataWatch(self.store, path, on_data).start())

    async def _load_topic_chunks(self, info: TopicInfo) -> AsyncIterator[list[LeaderAndIsr]]:
        name = info.name
        if name not in self.topics:
            await self._watch_topic(name)
        self.topics[name] = info
        partitions = sorted(info.assignment.items())
        for start in range(0, len(partitions), STORE_BATCH):
            chunk = partitions[start : start + STORE_BATCH]
            read = await self._read_states([(name, p) for p, _ in chunk])
            new = []
            for (partition, replicas), state in zip(chunk, read, strict=True):
                if state is None:
                    live = [r for r in replicas if r in self.live_brokers]
                    new.append(LeaderAndIsr(name, partition, live[0] if live else -1, 0, live,
                                            replicas))
                else:
                    self._set_state(state, "read from the store")
            if new:
                await self._create_states(new)
            yield [self.states[(name, p)] for p, _ in chunk]

    async def _read_registrations(self, broker_ids: set[int]) -> None:
        """The registrations of brokers that joined; the channel learns where they listen."""
        ids = sorted(broker_ids)
        for broker_id, got in zip(ids, await self.store.get_many(
                [paths.broker(b) for b in ids]), strict=True):
            if got is not None:
                self.registrations[broker_id] = _json(got[0])
        for broker_id in set(self.registrations) - self.live_brokers:
            del self.registrations[broker_id]
        self.channel.update_brokers({b: (data["host"], data["port"])
                                     for b, data in self.registrations.items()})

    async def _on_startup(self) -> None:
        # Every child watch armed by its first read; later changes come as events.
        self.live_brokers = {int(b) for b in await self._children(BrokerChange)}
        await self._read_registrations(self.live_brokers)
        await self._load_topics(await self._children(TopicChange))
        offline = [k for k, s in self.states.items() if s.leader not in self.live_brokers]
        await self._elect_for(offline)
        # Brokers that died while there was no controller leave the ISRs of partitions whose
        # leader lives (Kafka's replica state machine marks their replicas offline at start-up).
        live = self.live_brokers
        await self._update_states([
            (key, state.leader, [r for r in state.isr if r in live])
            for key, state in self.states.items()
            if state.leader in live and any(r not in live for r in state.isr)])
        self._send_update_metadata()
        await self._send_leader_and_isr(list(self.states.values()))
        self._send_update_metadata()
        await self._on_topic_deletion(await self._children(TopicDeletion))
        await self._on_isr_change(await self._children(IsrChangeNotification))
        await self._on_log_dir_event(await self._children(LogDirEventNotification))
        await self._resume_reassignments(lambda _assignment: True)
        log.info("ready to serve as the new controller", broker_id=self.broker_id,
                 controller_epoch=self.epoch, partitions=len(self.states))

    async def _on_broker_change(self, children: list[str]) -> None:
        live = {int(b) for b in children}
        new, dead = live - self.live_brokers, self.live_brokers - live
        self.live_brokers = live
        self.shutting_down &= live
        await self._read_registrations(new)
        for broker_id in new | dead:  # a broker that registers again reads its dirs afresh
            self.offline_replicas.pop(broker_id, None)
        if dead:
            log.info("brokers left", brokers=sorted(dead), controller_epoch=self.epoch)
            affected = [k for k, s in self.states.items()
                        if s.leader in dead or any(r in dead for r in s.isr)]
            changes = []
            for key in affected:
                state = self.states[key]
                if state.leader in dead or state.leader < 0:
                    leader, isr = self._elect_leader(state)
                else:  # leader alive: only the dead leave the ISR
                    leader, isr = state.leader, [r for r in state.isr if r not in dead]
                if (leader, isr) != (state.leader, state.isr):
                    changes.append((key, leader, isr))
            changed = await self._update_states(changes)
            self._send_update_metadata()
            await self._send_leader_and_isr(changed)
        if new:
            log.info("brokers joined", brokers=sorted(new), controller_epoch=self.epoch)
            offline = [k for k, s in self.states.items()
                       if s.leader < 0 and any(r in new for r in s.replicas)]
            await self._elect_for(offline)
            self._send_update_metadata()
            # New brokers get every partition they hold (as followers, most of them).
            await self._send_leader_and_isr(list(self.states.values()), only=new)
            await self._send_leader_and_isr([self.states[k] for k in offline])
            # A reassignment waiting for one of them goes on (Kafka's onBrokerStartup)
            await self._resume_reassignments(
                lambda assignment: any(r in new for r in assignment.target_replicas))
        self._retrack(new | dead, f"brokers joined {sorted(new)}, left {sorted(dead)}")
        self.deletion.on_brokers_changed(new, dead)
        self._send_update_metadata()

    async def _on_topic_change(self, children: list[str]) -> None:
        # A set difference: a burst of creations is one event, whatever the number of topics.
        created = sorted(set(children) - self.topics.keys() - self.deletion.topics.keys())
        states = await self._load_topics(created)
        if states:
            self._send_update_metadata(frozenset((st.topic, st.partition) for st in states))
            await self._send_leader_and_isr(states)
            self._send_update_metadata()

    async def _on_partition_change(self, name: str) -> None:
        """A topic's assignment grew (CreatePartitions): elect leaders for the new partitions."""
        if name not in self.topics:
            return
        known = {(name, p) for p in self.topics[name].assignment}
        states = [s for s in await self._load_topics([name])
                  if (s.topic, s.partition) not in known]
        if states:
            self._send_update_metadata(frozenset((st.topic, st.partition) for st in states))
            await self._send_leader_and_isr(states)
            self._send_update_metadata()

    async def _on_config_change(self, name: str) -> None:
        """A topic's config overrides changed: every broker learns them through UpdateMetadata
        (and applies them to its logs); DescribeConfigs answers from there."""
        current = self.topics.get(name)
        info = await self._read_topic(name) if current is not None else None
        if current is not None and info is not None and info.configs != current.configs:
            self.topics[info.name] = info
            self._send_update_metadata()

    async def _on_topic_deletion(self, children: list[str]) -> None:
        """Topics marked for deletion: the TopicDeletionManager takes them; their partitions
        leave the metadata at once, their nodes the store once every replica deleted its log."""
        if not children:
            return
        for n, name in enumerate(children):
            if n and n % STORE_BATCH == 0:
                await serve_others()
            if self.deletion.is_being_deleted(name):
                continue
            info = self.topics.pop(name, None)
            assignment = dict(info.assignment) if info is not None else {}
            for partition in assignment:
                self.states.pop((name, partition), None)
                self._tracked_replicas.pop((name, partition), None)
            self.deletion.enqueue(name, assignment)
            log.info("topic deletion started", topic=name, partitions=len(assignment))
            if self.deletion.take_completed(name):
                await self._remove_topic_nodes(name)
        self._send_update_metadata()

    def _stop_replica_answered(self, broker_id: int,
                               errors: dict[tuple[str, int], ErrorCode]) -> None:
        self.queue.put_nowait(StopReplicaResponse(broker_id, errors))

    async def _on_stop_replica_response(self, broker_id: int,
                                        errors: dict[tuple[str, int], ErrorCode]) -> None:
        for topic in self.deletion.on_stop_replica_response(broker_id, errors):
            await self._remove_topic_nodes(topic)

    async def _remove_topic_nodes(self, name: str) -> None:
        """The last step of a deletion: the topic's nodes leave the store (the name is free)."""
        for path in (paths.topic(name), paths.topic_config(name), paths.delete_topic(name)):
            with contextlib.suppress(NoNodeError):
                await self.store.delete(path, recursive=True)
        log.info("topic deleted", topic=name)

    async def _on_isr_change(self, children: list[str]) -> None:
        if not children:
            return
        changed = set()
        for child in children:
            with contextlib.suppress(NoNodeError):
                data, _ = await self.store.get_json(f"{paths.ISR_CHANGES}/{child}")
                for topic, partition in data["partitions"]:
                    if topic in self.topics:
                        state = await self._read_state(topic, partition)
                        if state is not None:
                            self._set_state(state, "ISR changed")
                            changed.add((topic, partition))
                await self.store.delete(f"{paths.ISR_CHANGES}/{child}")
        self._send_update_metadata()
        # A reassignment completes once its target replicas are all in the ISR (Kafka's
        # PartitionReassignmentIsrChangeHandler, here fed by the ISR change notifications).
        for key in sorted(changed):
            if self._assignment(key).is_being_reassigned:
                await self._maybe_complete_reassignment(key)

    async def _on_log_dir_event(self, children: list[str]) -> None:
        """Brokers whose log dir failed (Kafka's onBrokerLogDirFailure): each is sent LeaderAndIsr
        for every replica it holds; its KAFKA_STORAGE_ERROR answers mark those offline."""
        brokers: set[int] = set()
        for child in children:
            with contextlib.suppress(NoNodeError):
                data, _ = await self.store.get_json(f"{paths.LOG_DIR_EVENTS}/{child}")
                brokers.add(int(data["broker"]))
                await self.store.delete(f"{paths.LOG_DIR_EVENTS}/{child}")
        for broker_id in sorted(brokers & self.live_brokers):
            log.info("log dir failed on a broker", broker_id=broker_id, controller_epoch=self.epoch)
            await self._send_leader_and_isr(
                [s for s in self.states.values() if broker_id in s.replicas], only={broker_id})

    async def _on_replicas_offline(self, broker_id: int, keys: frozenset[tuple[str, int]]) -> None:
        """Replicas on a failed log dir go offline (Kafka's OfflineReplica): out of the ISR, and
        the partitions they led elect a leader among the other live ISR members."""
        if broker_id not in self.live_brokers:
            return  # it left (or came back, and its dirs were read afresh)
        new = keys - self.offline_replicas.setdefault(broker_id, set())
        self.offline_replicas[broker_id] |= new
        changes = []
        for key in sorted(new):
            state = self.states.get(key)
            if state is None:
                continue
            if state.leader == broker_id:
                leader, isr = self._elect_leader(state)
            else:
                leader, isr = state.leader, [r for r in state.isr if r != broker_id]
            if (leader, isr) != (state.leader, state.isr):
                changes.append((key, leader, isr))
        log.info("replicas offline", broker_id=broker_id, partitions=len(new),
                 changed=len(changes), controller_epoch=self.epoch)
        changed = await self._update_states(changes)
        self._retrack({broker_id}, f"log dir failed on broker {broker_id}")
        self._send_update_metadata()
        await self._send_leader_and_isr(changed)

    async def _on_controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        if broker_id not in self.live_brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not live")
        self.shutting_down.add(broker_id)
        log.info("controlled shutdown", broker_id=broker_id, controller_epoch=self.epoch)
        changes = []
        for key, state in list(self.states.items()):
            if broker_id not in state.replicas or len(state.replicas) == 1:
                continue
            if state.leader == broker_id:
                leader, isr = self._elect_leader(state)
                if leader < 0 or leader == broker_id:
                    continue  # nobody else can lead it: it stays, and is reported
                isr = [r for r in isr if r != broker_id]
            elif broker_id in state.isr:
                leader, isr = state.leader, [r for r in state.isr if r != broker_id]
            else:
                continue
            changes.append((key, leader, isr))
        changed = await self._update_states(changes)
        if changed:
            self._send_update_metadata()
            await self._send_leader_and_isr(changed, only=self.live_brokers - {broker_id})
        remaining = sorted(k for k, s in self.states.items() if s.leader == broker_id)
        # It stops following too, or its fetches would bring it back into the ISRs.
        following = [k for k, s in self.states.items()
                     if broker_id in s.replicas and s.leader != broker_id]
        if following:
            self.channel.send_stop_replica(broker_id, self.epoch, following, delete=False)
        return remaining

    def _can_lead_preferred(self, state: LeaderAndIsr) -> bool:
        preferred = state.replicas[0]
        return (state.leader != preferred and preferred in state.isr
                and self._replica_online(preferred, state) and preferred not in self.shutting_down)

    async def _on_auto_leader_rebalance(self) -> None:
        """Elect preferred leaders for brokers whose share of not-led preferred partitions is above
        leader.imbalance.per.broker.percentage (Kafka's checkAndTriggerAutoLeaderRebalance)."""
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100
        by_preferred: dict[int, list[tuple[str, int]]] = {}
        for key, state in self.states.items():
            if self._assignment(key).is_being_reassigned:
                continue  # as Kafka: a moving partition is left alone
            by_preferred.setdefault(state.replicas[0], []).append(key)
        keys = []
        for broker_id, owned in by_preferred.items():
            not_led = [k for k in owned if self.states[k].leader != broker_id]
            if broker_id in self.live_brokers and len(not_led) / len(owned) > threshold:
                keys += [k for k in not_led if self._can_lead_preferred(self.states[k])]
        if keys:
            log.info("auto leader rebalance", partitions=len(keys), controller_epoch=self.epoch)
            await self._on_preferred_election(keys)

    async def _on_preferred_election(self, keys: list[tuple[str, int]] | None) -> None:
        changes = []
        for key in keys if keys is not None else list(self.states):
            state = self.states.get(key)
            if state is not None and self._can_lead_preferred(state):
                changes.append((key, state.replicas[0], state.isr))
        changed = await self._update_states(changes)
        if changed:
            self._send_update_metadata()
            await self._send_leader_and_isr(changed)
            self._send_update_metadata()

    async def _on_elect_leaders(self, keys: list[tuple[str, int]], unclean: bool
                                ) -> dict[tuple[str, int], int | KafkaError]:
        """Kafka's processReplicaLeaderElection for an admin: PREFERRED moves leadership to the
        first replica where it is live and in the ISR; UNCLEAN elects a leader for a partition
        whose leader is gone, an out-of-ISR live replica if need be."""
        results: dict[tuple[str, int], int | KafkaError] = {}
        changes = []
        # One error object per answer that names no partition: a request may list 100,000.
        unknown = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        not_needed = KafkaError(ErrorCode.ELECTION_NOT_NEEDED)
        for n, key in enumerate(keys):
            if n and n % REQUEST_CHUNK == 0:
                await serve_others()
            state = self.states.get(key)
            if state is None:
                results[key] = unknown
            elif not unclean:
                if state.leader == state.replicas[0]:
                    results[key] = not_needed
                elif self._can_lead_preferred(state):
                    changes.append((key, state.replicas[0], state.isr))
                else:
                    results[key] = KafkaError(
                        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                        f"Failed to elect leader for partition {key[0]}-{key[1]} under strategy "
                        "PreferredReplicaPartitionLeaderElectionStrategy")
            elif state.leader >= 0 and state.leader in self.live_brokers:
                results[key] = not_needed
            else:
                leader, isr = self._elect_leader(state, unclean=True)
                if leader >= 0:
                    changes.append((key, leader, isr))
                else:
                    results[key] = KafkaError(
                        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                        f"Failed to elect leader for partition {key[0]}-{key[1]} under strategy "
                        "OfflinePartitionLeaderElectionStrategy(true)")
        changed = await self._update_states(changes)
        if changed:
            log.info("leaders elected", partitions=len(changed), unclean=unclean,
                     controller_epoch=self.epoch)
            self._send_update_metadata()
            await self._send_leader_and_isr(changed)
            self._send_update_metadata()
        for state in changed:
            results[(state.topic, state.partition)] = state.leader
        return results


def _json(data: bytes) -> dict:
    return json.loads(data) if data else {}


def _topic_info(name: str, data: dict, configs: dict[str, str]) -> TopicInfo:
    return TopicInfo(
        name,
        uuid.UUID(data["topic_id"]),
        {int(p): list(r) for p, r in data["partitions"].items()},
        configs,
        name in INTERNAL_TOPICS or data.get("internal", False),  # the flag: older stores
        {int(p): list(r) for p, r in (data.get("adding_replicas") or {}).items() if r},
        {int(p): list(r) for p, r in (data.get("removing_replicas") or {}).items() if r},
    )
