"""TopicDeletionManager: a topic marked for deletion (/admin/delete_topics/<name>) is deleted once
every replica has deleted its log, as Kafka's controller does it.

At the start its partitions go Offline, then NonExistent (brokers stop showing them), and each
replica goes Offline; a replica whose broker is live is sent StopReplica(delete) and goes
ReplicaDeletionStarted, then ReplicaDeletionSuccessful when its broker answers (Ineligible if it
answers an error). A replica whose broker is down waits ReplicaDeletionIneligible until the broker
comes back, and is sent StopReplica(delete) then. Once every replica is Successful, they go
NonExistent and the topic's nodes leave the store; until then the topic cannot be created again
("marked for deletion").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Protocol

from broker.controller.controller_channel import ControllerChannel
from broker.controller.partition_state_machine import PartitionState, PartitionStateMachine
from broker.controller.replica_state_machine import Replica, ReplicaState, ReplicaStateMachine
from broker.logs import get_logger
from protocol.errors import ErrorCode

log = get_logger("kafka_sim.controller")


class DeletionContext(Protocol):
    """What the manager needs of its controller."""
    epoch: int
    live_brokers: set[int]
    channel: ControllerChannel
    partition_states: PartitionStateMachine
    replica_states: ReplicaStateMachine


class TopicDeletionManager:
    def __init__(self, controller: DeletionContext,
                 answered: Callable[[int, dict[tuple[str, int], ErrorCode]], None]) -> None:
        self._controller = controller
        # The replicas of each topic being deleted
        self.topics: dict[str, list[Replica]] = {}
        # Takes a broker's StopReplica answer (as a controller event: the state machines change
        # only on the controller's task)
        self._answered = answered

    def is_being_deleted(self, topic: str) -> bool:
        return topic in self.topics

    def enqueue(self, topic: str, assignment: dict[int, list[int]]) -> None:
        """Start deleting `topic`, whose partitions had these replicas."""
        c = self._controller
        keys = [(topic, p) for p in assignment]
        c.partition_states.transition(keys, PartitionState.OFFLINE, "topic deletion started")
        c.partition_states.transition(keys, PartitionState.NON_EXISTENT, "topic deletion started")
        replicas = [(topic, p, r) for p, rs in sorted(assignment.items()) for r in rs]
        self.topics[topic] = replicas
        c.replica_states.transition(replicas, ReplicaState.OFFLINE, "topic deletion started")
        self._start(replicas)

    def take_completed(self, topic: str) -> bool:
        """Whether `topic` is wholly deleted already (it had no replica to wait for)."""
        return topic in self._completed({topic})

    def _start(self, replicas: Iterable[Replica]) -> None:
        """StopReplica(delete) to the live brokers of these (Offline) replicas; the others wait."""
        c = self._controller
        by_broker: dict[int, list[tuple[str, int]]] = {}
        dead = []
        for topic, partition, broker_id in replicas:
            if broker_id in c.live_brokers:
                by_broker.setdefault(broker_id, []).append((topic, partition))
            else:
                dead.append((topic, partition, broker_id))
        c.replica_states.transition(dead, ReplicaState.DELETION_INELIGIBLE, "broker down")
        for broker_id, keys in sorted(by_broker.items()):
            c.replica_states.transition([(t, p, broker_id) for t, p in keys],
                                        ReplicaState.DELETION_STARTED, "StopReplica(delete) sent")
            c.channel.send_stop_replica(broker_id, c.epoch, keys, delete=True,
                                        on_response=functools.partial(self._answered, broker_id))

    def on_stop_replica_response(self, broker_id: int,
                                 errors: dict[tuple[str, int], ErrorCode]) -> list[str]:
        """A broker's StopReplica(delete) answer; returns the topics now wholly deleted."""
        machine = self._controller.replica_states
        done, failed = [], []
        for (topic, partition), code in errors.items():
            replica = (topic, partition, broker_id)
            if topic in self.topics and machine.state(replica) is ReplicaState.DELETION_STARTED:
                (done if code == ErrorCode.NONE else failed).append(replica)
        machine.transition(done, ReplicaState.DELETION_SUCCESSFUL, "log deleted")
        machine.transition(failed, ReplicaState.DELETION_INELIGIBLE, "StopReplica failed")
        if failed:
            log.warning("replicas could not delete their logs", broker_id=broker_id,
                        replicas=len(failed))
        return self._completed({t for t, _, _ in done})

    def on_brokers_changed(self, joined: set[int], left: set[int]) -> None:
        """Replicas waiting on a broker that left become Ineligible; Ineligible ones on a broker
        that came back are sent StopReplica(delete) again (Kafka's resumeDeletions)."""
        machine = self._controller.replica_states
        for replicas in self.topics.values():
            machine.transition([r for r in replicas if r[2] in left and
                                machine.state(r) is ReplicaState.DELETION_STARTED],
                               ReplicaState.DELETION_INELIGIBLE, "broker down")
            retry = [r for r in replicas if r[2] in joined and
                     machine.state(r) is ReplicaState.DELETION_INELIGIBLE]
            machine.transition(retry, ReplicaState.OFFLINE, "broker back: deletion retried")
            self._start(retry)

    def _completed(self, topics: set[str]) -> list[str]:
        machine = self._controller.replica_states
        out = []
        for topic in sorted(topics):
            replicas = self.topics[topic]
            if all(machine.state(r) is ReplicaState.DELETION_SUCCESSFUL for r in replicas):
                machine.transition(replicas, ReplicaState.NON_EXISTENT, "topic deleted")
                del self.topics[topic]
                out.append(topic)
        return out

    def view(self) -> dict[str, dict[str, int]]:
        """Per topic being deleted, its replicas per state."""
        machine = self._controller.replica_states
        out: dict[str, dict[str, int]] = {}
        for topic, replicas in self.topics.items():
            counts = out.setdefault(topic, {})
            for replica in replicas:
                state = machine.state(replica).value
                counts[state] = counts.get(state, 0) + 1
        return out
