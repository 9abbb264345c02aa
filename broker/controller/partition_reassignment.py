"""The controller's partition reassignment (KIP-455, Kafka's ZooKeeper-mode sequence): the full
replica set is written to the topic node first, so a new controller can resume it; adding replicas
follow until they are all in the ISR; then leadership moves if it must, the set narrows to the
target and removed replicas are stopped and deleted. A mixin of `Controller`, run on its queue."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.controller.pacing import REQUEST_CHUNK, serve_others
from broker.logs import get_logger
from broker.metadata import zk_paths as paths
from broker.metadata.replica_assignment import ReplicaAssignment
from broker.metadata.store import BadVersionError
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.controller.controller_channel import ControllerChannel
    from broker.metadata.metadata_cache import TopicInfo
    from broker.metadata.partition_state import LeaderAndIsr
    from broker.metadata.store import MetadataStore

log = get_logger("kafka_sim.controller")

Key = tuple[str, int]


class PartitionReassignment:
    # What it uses of the controller (controller.py).
    store: MetadataStore
    channel: ControllerChannel
    broker_id: int
    epoch: int
    live_brokers: set[int]
    shutting_down: set[int]
    topics: dict[str, TopicInfo]
    states: dict[Key, LeaderAndIsr]

    if TYPE_CHECKING:  # ... and of its methods
        async def _read_state(self, topic: str, partition: int) -> LeaderAndIsr | None: ...
        async def _update_states(self, changes: list[tuple[Key, int, list[int]]]
                                 ) -> list[LeaderAndIsr]: ...
        async def _send_leader_and_isr(self, states: list[LeaderAndIsr],
                                       only: set[int] | None = None) -> None: ...
        def _send_update_metadata(self, pending: frozenset[Key] = frozenset()) -> None: ...

    # -- requests ---------------------------------------------------------------------------

    async def _on_alter_reassignments(self, payload: dict[Key, list[int] | None]
                                      ) -> dict[Key, KafkaError | None]:
        """Kafka's processApiPartitionReassignment: validate each, then start (or cancel) it."""
        results: dict[Key, KafkaError | None] = {}
        wanted: dict[Key, ReplicaAssignment] = {}
        # One error object per answer that names no partition: a request may list 100,000.
        unknown = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        no_reassignment = KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                     "No partition reassignment is in progress.")
        for n, (key, target) in enumerate(payload.items()):
            if n and n % REQUEST_CHUNK == 0:
                await serve_others()
            current = self._assignment(key)
            error = None if target is None else self._invalid_replicas(target, current)
            if error is not None:
                results[key] = error
            elif not current.replicas:  # no such partition (once its target is checked, as Kafka)
                results[key] = unknown if target is not None else no_reassignment
            elif current.is_being_reassigned:  # replaced, or cancelled back to its origin
                wanted[key] = current.reassign_to(
                    current.origin_replicas if target is None else list(target))
            elif target is not None:
                wanted[key] = current.reassign_to(list(target))
            else:
                results[key] = no_reassignment
        deleting: dict[str, bool] = {}
        for n, (key, assignment) in enumerate(wanted.items()):
            if n and n % REQUEST_CHUNK == 0:
                await serve_others()
            if key[0] not in deleting:
                deleting[key[0]] = await self.store.exists(paths.delete_topic(key[0])) is not None
            if deleting[key[0]]:
                results[key] = unknown
                continue
            try:
                await self._on_partition_reassignment(key, assignment)
                results[key] = None
            except Exception:
                log.exception("partition reassignment failed", topic=key[0], partition=key[1])
                results[key] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR)
        return results

    def _on_list_reassignments(self, keys: list[Key] | None) -> dict[Key, ReplicaAssignment]:
        listed = list(self.states) if keys is None else keys
        return {key: assignment for key in listed
                if (assignment := self._assignment(key)).is_being_reassigned}

    def _invalid_replicas(self, target: list[int], current: ReplicaAssignment) -> KafkaError | None:
        """Kafka's validateReplicas: a target list Kafka refuses (INVALID_REPLICA_ASSIGNMENT)."""
        listed = ", ".join(map(str, target))
        if not target:
            message = "Empty replica list specified in partition reassignment."
        elif len(set(target)) != len(target):
            message = f"Duplicate replica ids in partition reassignment replica list: [{listed}]"
        elif any(r < 0 for r in target):
            message = f"Invalid broker id in replica list: [{listed}]"
        else:
            adding = current.reassign_to(list(target)).adding if current.replicas else target
            if set(adding) <= self.live_brokers:
                return None
            message = (f"Replica assignment has brokers that are not alive. Replica list: "
                       f"[{', '.join(map(str, adding))}], live broker list: "
                       f"[{', '.join(map(str, sorted(self.live_brokers)))}]")
        return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)

    # -- the sequence -----------------------------------------------------------------------

    async def _on_partition_reassignment(self, key: Key, assignment: ReplicaAssignment) -> None:
        """Kafka's onPartitionReassignment: phase U (the topic node), then A or B."""
        await self._update_current_reassignment(key, assignment)
        if not await self._reassignment_complete(key, assignment):
            # A: a new leader epoch, and LeaderAndIsr to every replica of RS: the adding ones
            # create their logs and follow the leader until they join the ISR.
            current = await self._read_state(*key) or self.states[key]
            changed = await self._update_states([(key, current.leader, current.isr)])
            await self._send_leader_and_isr(changed)
            self._send_update_metadata()
            log.info("partition reassignment started", topic=key[0], partition=key[1],
                     replicas=assignment.replicas, adding=assignment.adding,
                     removing=assignment.removing, controller_epoch=self.epoch)
        else:
            await self._complete_reassignment(key, assignment)

    async def _update_current_reassignment(self, key: Key, assignment: ReplicaAssignment) -> None:
        current = self._assignment(key)
        if current == assignment:
            return
        await self._write_assignment(key, assignment)  # U1, U2: the node first, for a failover
        # U3: the adding replicas of a reassignment this one replaces (or cancels) go now
        unneeded = [r for r in current.replicas if r not in assignment.replicas]
        if unneeded:
            await self._narrow(key, assignment.replicas, unneeded)

    async def _maybe_complete_reassignment(self, key: Key) -> None:
        assignment = self._assignment(key)
        if await self._reassignment_complete(key, assignment):
            log.info("target replicas caught up", topic=key[0], partition=key[1],
                     target=assignment.target_replicas)
            await self._complete_reassignment(key, assignment)

    async def _reassignment_complete(self, key: Key, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        state = await self._read_state(*key)  # the store's ISR, as Kafka reads it
        return state is not None and set(assignment.target_replicas) <= set(state.isr)

    async def _complete_reassignment(self, key: Key, assignment: ReplicaAssignment) -> None:
        """Phase B: RS = TRS in memory, leadership moved off a removed (or dead) leader and the
        ISR narrowed in one new leader epoch, the removed replicas stopped and deleted, then the
        node rewritten without the reassignment: last, as it is the only record of ORS."""
        target = ReplicaAssignment(assignment.target_replicas)
        if not await self._narrow(key, target.replicas, assignment.removing):
            log.warning("reassignment waits: no target replica can lead", topic=key[0],
                        partition=key[1], target=target.replicas)
            return
        await self._write_assignment(key, target)
        self._send_update_metadata()
        log.info("partition reassignment completed", topic=key[0], partition=key[1],
                 replicas=target.replicas, controller_epoch=self.epoch)

    async def _narrow(self, key: Key, replicas: list[int], removed: list[int]) -> bool:
        """The partition keeps only `replicas`: a leader among them (Kafka's reassign-partition
        election: the first live one in the ISR, if the leader must move), the ISR without the
        `removed`, whose replicas are stopped and deleted. False when no replica can lead."""
        state = await self._read_state(*key) or self.states[key]
        isr = [r for r in state.isr if r in replicas] or state.isr
        leader = state.leader
        if leader not in replicas or leader not in self.live_brokers:
            leader = next((r for r in replicas if r in isr and r in self.live_brokers
                           and r not in self.shutting_down), -1)
            if leader < 0 and state.leader >= 0:
                return False
        info = self.topics[key[0]]
        current = info.replica_assignment(key[1])
        if current.replicas != replicas:  # phase B: RS = TRS in memory (B2), the node later (B6)
            self._set_assignment(key, ReplicaAssignment(replicas))
        changed = await self._update_states([(key, leader, isr)])
        await self._send_leader_and_isr(changed)
        for broker_id in removed:
            if broker_id in self.live_brokers:
                try:
                    self.channel.send_stop_replica(broker_id, self.epoch, [key], delete=True)
                except KafkaError as exc:
                    log.warning("StopReplica refused", broker_id=broker_id, error=exc.code.name)
        self._send_update_metadata()
        return True

    async def _resume_reassignments(self, should_resume: Callable[[ReplicaAssignment], bool]
                                    ) -> None:
        """A new controller (or a returning broker) takes up the reassignments in the store."""
        for key in sorted(k for k in self.states if self._assignment(k).is_being_reassigned):
            assignment = self._assignment(key)
            if not should_resume(assignment):
                continue
            try:
                await self._on_partition_reassignment(key, assignment)
            except Exception:
                log.exception("partition reassignment not resumed", topic=key[0], partition=key[1])

    # -- the assignment, in memory and in the topic node ------------------------------------

    def _assignment(self, key: Key) -> ReplicaAssignment:
        info = self.topics.get(key[0])
        if info is None or key[1] not in info.assignment:
            return ReplicaAssignment([])
        return info.replica_assignment(key[1])

    def _set_assignment(self, key: Key, assignment: ReplicaAssignment) -> None:
        info = self.topics[key[0]]
        partition = key[1]

        def with_entry(entries: dict[int, list[int]], replicas: list[int]) -> dict[int, list[int]]:
            out = {p: r for p, r in entries.items() if p != partition}
            if replicas:
                out[partition] = list(replicas)
            return out

        # A new TopicInfo, never a changed one: snapshots already sent share the old.
        self.topics[key[0]] = dataclasses.replace(
            info, assignment={**info.assignment, partition: list(assignment.replicas)},
            adding_replicas=with_entry(info.adding_replicas, assignment.adding),
            removing_replicas=with_entry(info.removing_replicas, assignment.removing))

    async def _write_assignment(self, key: Key, assignment: ReplicaAssignment) -> None:
        """The topic node (Kafka's TopicZNode v3) with this partition's replicas, and its
        adding_replicas/removing_replicas entries only while it is being reassigned."""
        name, partition = key
        for _ in range(3):
            data, stat = await self.store.get_json(paths.topic(name))
            data["version"] = 3
            data["partitions"][str(partition)] = list(assignment.replicas)
            for field, replicas in (("adding_replicas", assignment.adding),
                                    ("removing_replicas", assignment.removing)):
                entries = {p: r for p, r in (data.get(field) or {}).items() if p != str(partition)}
                if replicas:
                    entries[str(partition)] = list(replicas)
                data[field] = entries
            try:
                await self.store.set_json(paths.topic(name), data, version=stat.version)
                break
            except BadVersionError:  # CreatePartitions wrote it meanwhile: again, on its version
                continue
        else:
            raise RuntimeError(f"could not write the assignment of {name}-{partition}")
        self._set_assignment(key, assignment)
