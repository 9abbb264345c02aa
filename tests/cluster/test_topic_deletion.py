"""Kafka's TopicDeletionManager and state machines in an embedded 3-broker cluster: a deleted
topic's partitions leave the metadata at once; its replicas go ReplicaDeletionStarted, then
Successful when their brokers answer StopReplica(delete); a replica whose broker is down waits
Ineligible, holding the topic's name ("marked for deletion"), until the broker is back and
deletes its log. The partition and replica states follow elections and brokers leaving."""

from __future__ import annotations

import pytest

from broker.controller.partition_state_machine import PartitionState
from broker.controller.replica_state_machine import ReplicaState
from broker.controller.state_machine import StateMachine
from broker.metadata import zk_paths as paths
from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from tests.cluster.test_replication import cluster, create  # noqa: F401 (the fixture)
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import CREATE_TOPICS

DELETE_TOPICS = 20


async def request(on: Cluster, api: int, version: int, body: dict):
    client = await RawClient.connect(on.brokers[0].port)
    try:
        return await client.request(api, version, body)
    finally:
        await client.close()


async def create_again(on: Cluster, name: str) -> tuple[int, str | None]:
    response = await request(on, CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 3, "configs": []}],
        "timeout_ms": 10_000})
    return response.topics[0].error_code, response.topics[0].error_message


def test_only_valid_transitions_are_made():
    machine = StateMachine("partition", PartitionState.NON_EXISTENT,
                           {PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
                            PartitionState.ONLINE: frozenset({PartitionState.NEW}),
                            PartitionState.NON_EXISTENT: frozenset({PartitionState.ONLINE})},
                           lambda: 7)
    assert machine.transition(["p"], PartitionState.ONLINE, "too soon") == ["p"]
    assert machine.state("p") is PartitionState.NON_EXISTENT and machine.invalid_transitions == 1
    assert machine.transition(["p"], PartitionState.NEW, "created") == []
    assert machine.transition(["p"], PartitionState.ONLINE, "elected") == []
    assert machine.history("p") == [
        {"from": "NonExistentPartition", "to": "NewPartition", "at_ms": 7, "reason": "created"},
        {"from": "NewPartition", "to": "OnlinePartition", "at_ms": 7, "reason": "elected"}]
    machine.transition(["p"], PartitionState.NON_EXISTENT, "deleted")
    assert machine.counts() == {} and machine.history("p") == []


async def test_states_follow_elections_and_brokers(cluster):  # noqa: F811
    leader, followers = await create(cluster, "followed")
    controller = cluster.active_controller()
    key = ("followed", 0)
    assert controller.partition_states.state(key) is PartitionState.ONLINE
    assert [t["to"] for t in controller.partition_states.history(key)] == [
        "NewPartition", "OnlinePartition"]
    assert {controller.replica_states.state((*key, r)) for r in range(3)} == {ReplicaState.ONLINE}
    down = followers[0].broker_id
    await cluster.stop_broker(down)
    await until(lambda: cluster.active_controller().replica_states.state((*key, down))
                is ReplicaState.OFFLINE)
    controller = cluster.active_controller()
    assert controller.partition_states.state(key) is PartitionState.ONLINE
    await cluster.start_broker(down)
    await until(lambda: cluster.active_controller().replica_states.state((*key, down))
                is ReplicaState.ONLINE)
    assert cluster.active_controller().partition_states.invalid_transitions == 0
    assert cluster.active_controller().replica_states.invalid_transitions == 0


@pytest.mark.parametrize("broker_down", [False, True])
async def test_a_topic_is_deleted_once_every_replica_deleted_its_log(cluster, broker_down):  # noqa: F811
    leader, followers = await create(cluster, "doomed")
    down = followers[0]
    folders = {b.broker_id: b.replica_manager.partitions[("doomed", 0)].log.directory
               for b in (leader, *followers)}
    if broker_down:
        await cluster.stop_broker(down.broker_id)
        await until(lambda: down.broker_id not in cluster.active_controller().live_brokers)
    response = await request(cluster, DELETE_TOPICS, 5, {"topic_names": ["doomed"],
                                                         "timeout_ms": 10_000})
    assert response.responses[0].error_code == ErrorCode.NONE
    controller = cluster.active_controller()
    store = controller.store
    replicas = {r: ("doomed", 0, r) for r in folders}
    if broker_down:
        # the live replicas deleted their logs; the stopped broker's waits for it
        await until(lambda: controller.replica_states.state(replicas[leader.broker_id])
                    is ReplicaState.DELETION_SUCCESSFUL)
        assert controller.replica_states.state(replicas[down.broker_id]) \
            is ReplicaState.DELETION_INELIGIBLE
        assert controller.partition_states.state(("doomed", 0)) is PartitionState.NON_EXISTENT
        assert controller.deletion.view() == {"doomed": {"ReplicaDeletionSuccessful": 2,
                                                         "ReplicaDeletionIneligible": 1}}
        assert await store.exists(paths.topic("doomed")) is not None
        assert await create_again(cluster, "doomed") == (
            ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'doomed' is marked for deletion.")
        assert not folders[leader.broker_id].exists() and folders[down.broker_id].exists()
        await cluster.start_broker(down.broker_id)
    await until(lambda: not controller.deletion.topics)
    assert await store.exists(paths.topic("doomed")) is None
    assert all(controller.replica_states.state(r) is ReplicaState.NON_EXISTENT
               for r in replicas.values())
    await until(lambda: not any(f.exists() for f in folders.values()))
    assert (await create_again(cluster, "doomed"))[0] == ErrorCode.NONE
    assert controller.replica_states.invalid_transitions == 0
