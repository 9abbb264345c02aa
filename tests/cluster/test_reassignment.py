"""Partition reassignment (AlterPartitionReassignments / ListPartitionReassignments, KIP-455) and
ElectLeaders in an embedded 3-broker cluster on the test's loop, over the wire with the raw client:
the topic node's adding/removing replicas while a move is under way, its completion once the
target replicas are in the ISR (the removed replica's folder deleted), cancellation, a new
controller resuming a move, Kafka's error codes, and preferred and unclean elections."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.metadata import zk_paths as paths
from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from tests.harness import cluster_config, led_here, until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import CREATE_TOPICS
from timer import ManualClock

ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 45, 46
PREFERRED, UNCLEAN = 0, 1


@pytest.fixture
async def cluster(tmp_path):
    cluster = Cluster(cluster_config(tmp_path, {"replica.lag.time.max.ms": "1000"}), 3,
                      clock=ManualClock(1_000_000))
    await cluster.start()
    for broker in cluster.brokers.values():
        await broker.metadata_cache.wait_for(lambda s: len(s.brokers) == 3, 10_000)
    yield cluster
    await cluster.stop()


async def request(cluster: Cluster, broker_id: int, api_key: int, version: int, body: dict):
    client = await RawClient.connect(cluster.brokers[broker_id].port)
    try:
        return await client.request(api_key, version, body)
    finally:
        await client.close()


def controller_id(cluster: Cluster) -> int:
    controller = cluster.active_controller()
    assert controller is not None
    return controller.broker_id


async def create(cluster: Cluster, name: str, assignment: dict[int, list[int]]) -> None:
    response = await request(cluster, 0, CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": p, "broker_ids": r} for p, r in assignment.items()]}],
        "timeout_ms": 10_000})
    assert response.topics[0].error_code == 0, response
    for p, replicas in assignment.items():
        await led_here(cluster.brokers[replicas[0]], name, p)


async def alter(cluster: Cluster, moves: dict[tuple[str, int], list[int] | None],
                broker_id: int | None = None) -> dict[tuple[str, int], int]:
    topics: dict[str, list] = {}
    for (topic, p), replicas in moves.items():
        topics.setdefault(topic, []).append({"partition_index": p, "replicas": replicas})
    response = await request(cluster, controller_id(cluster) if broker_id is None else broker_id,
                             ALTER_REASSIGNMENTS, 0, {"timeout_ms": 10_000, "topics": [
                                 {"name": t, "partitions": ps} for t, ps in topics.items()]})
    assert response.error_code == 0, response
    return {(t.name, p.partition_index): p.error_code for t in response.responses
            for p in t.partitions}


async def listed(cluster: Cluster, topics=None) -> dict[tuple[str, int], tuple]:
    response = await request(cluster, controller_id(cluster), LIST_REASSIGNMENTS, 0,
                             {"timeout_ms": 10_000, "topics": topics})
    assert response.error_code == 0, response
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                          list(p.removing_replicas))
            for t in response.topics for p in t.partitions}


async def topic_node(cluster: Cluster, name: str) -> dict:
    return (await cluster.context.store.get_json(paths.topic(name)))[0]


def log_dir(cluster: Cluster, broker_id: int) -> Path:
    return Path(cluster.configs[broker_id]["log.dirs"])


def state(cluster: Cluster, name: str, partition: int = 0):
    return cluster.active_controller().states[(name, partition)]


async def test_reassignment_moves_the_partition_once_the_new_replica_is_in_the_isr(cluster):
    await create(cluster, "moving", {0: [0, 1]})
    cluster.pause_replication(2)  # the new replica cannot catch up yet: the move stays under way
    assert await alter(cluster, {("moving", 0): [1, 2]}) == {("moving", 0): 0}

    node = await topic_node(cluster, "moving")
    assert node["version"] == 3
    assert node["partitions"]["0"] == [1, 2, 0]  # target first, then the rest of the origin
    assert node["adding_replicas"] == {"0": [2]} and node["removing_replicas"] == {"0": [0]}
    assert await listed(cluster) == {("moving", 0): ([1, 2, 0], [2], [0])}
    assert await listed(cluster, [{"name": "moving", "partition_indexes": [0, 5]}]) == {
        ("moving", 0): ([1, 2, 0], [2], [0])}
    assert state(cluster, "moving").leader == 0 and state(cluster, "moving").replicas == [1, 2, 0]
    assert ("moving", 0) in cluster.brokers[2].replica_manager.partitions  # following already
    view = {(p["topic"], p["partition"]): p for p in await cluster.partitions("moving")}
    assert view[("moving", 0)]["adding_replicas"] == [2]
    assert view[("moving", 0)]["removing_replicas"] == [0]

    cluster.resume_replication(2)

    async def moved() -> bool:
        return not (await topic_node(cluster, "moving"))["adding_replicas"]

    await until(moved)
    node = await topic_node(cluster, "moving")
    assert node["partitions"]["0"] == [1, 2] and node["removing_replicas"] == {}
    final = state(cluster, "moving")
    assert final.leader == 1 and final.replicas == [1, 2] and sorted(final.isr) == [1, 2]
    assert await listed(cluster) == {}
    await until(lambda: ("moving", 0) not in cluster.brokers[0].replica_manager.partitions)
    assert not (log_dir(cluster, 0) / "moving-0").exists()  # StopReplica(delete) removed it
    assert (log_dir(cluster, 2) / "moving-0").exists()
    for broker in cluster.brokers.values():  # every broker's metadata agrees
        await broker.metadata_cache.wait_for(
            lambda s: s.topics["moving"].assignment[0] == [1, 2], 5_000)



async def test_a_cancelled_reassignment_returns_to_the_origin_replicas(cluster):
    await create(cluster, "cancelled", {0: [0, 1]})
    cluster.pause_replication(2)
    assert await alter(cluster, {("cancelled", 0): [1, 2]}) == {("cancelled", 0): 0}
    await until(lambda: ("cancelled", 0) in cluster.brokers[2].replica_manager.partitions)
    assert (log_dir(cluster, 2) / "cancelled-0").exists()

    assert await alter(cluster, {("cancelled", 0): None}) == {("cancelled", 0): 0}
    node = await topic_node(cluster, "cancelled")
    # ORS is what RS holds besides the adding replicas; its order is not kept (as Kafka warns)
    assert node["partitions"]["0"] == [1, 0]
    assert node["adding_replicas"] == {} and node["removing_replicas"] == {}
    final = state(cluster, "cancelled")
    assert final.leader == 0 and final.replicas == [1, 0] and sorted(final.isr) == [0, 1]
    assert ("cancelled", 0) not in cluster.brokers[2].replica_manager.partitions
    assert not (log_dir(cluster, 2) / "cancelled-0").exists()
    assert await listed(cluster) == {}
    assert await alter(cluster, {("cancelled", 0): None}) == {
        ("cancelled", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}


async def test_reassignment_errors_are_kafkas(cluster):
    await create(cluster, "checked", {0: [0, 1]})
    results = await alter(cluster, {("checked", 0): [], ("checked", 1): [0, 0],
                                    ("nope", 0): [0, -1], ("nope", 1): [0, 7],
                                    ("nope", 2): [0, 1], ("checked", 9): [1, 2],
                                    ("nope", 3): None})
    assert results == {
        ("checked", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,  # empty
        ("checked", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,  # a broker twice
        ("nope", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,  # a negative id
        ("nope", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,  # broker 7 is not alive
        ("nope", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("checked", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 3): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
    }
    assert (await topic_node(cluster, "checked"))["partitions"] == {"0": [0, 1]}

    other = next(b for b in cluster.brokers if b != controller_id(cluster))
    response = await request(cluster, other, ALTER_REASSIGNMENTS, 0, {"topics": [
        {"name": "checked", "partitions": [{"partition_index": 0, "replicas": [1, 2]}]}]})
    assert response.error_code == ErrorCode.NOT_CONTROLLER and response.responses == []
    response = await request(cluster, other, LIST_REASSIGNMENTS, 0, {"topics": None})
    assert response.error_code == ErrorCode.NOT_CONTROLLER
    response = await request(cluster, other, ELECT_LEADERS, 2, {
        "election_type": PREFERRED, "topic_partitions": [{"topic": "checked", "partitions": [0]}],
        "timeout_ms": 5_000})
    assert response.error_code == 0
    assert [(r.topic, p.partition_id, p.error_code) for r in response.replica_election_results
            for p in r.partition_result] == [("checked", 0, ErrorCode.NOT_CONTROLLER)]


async def test_a_new_controller_resumes_a_reassignment(cluster):
    await create(cluster, "resumed", {0: [0, 1]})
    assert controller_id(cluster) == 0
    cluster.pause_replication(2)
    assert await alter(cluster, {("resumed", 0): [1, 2]}) == {("resumed", 0): 0}
    await cluster.stop_broker(0)  # the controller, and the partition's leader, leaves
    await until(lambda: (c := cluster.active_controller()) is not None and c.broker_id != 0)
    await cluster.active_controller().queue.join()  # its start-up, the reassignment's resumption
    assert (await topic_node(cluster, "resumed"))["adding_replicas"] == {"0": [2]}
    assert await listed(cluster) == {("resumed", 0): ([1, 2, 0], [2], [0])}
    cluster.resume_replication(2)

    async def resumed() -> bool:
        return (await topic_node(cluster, "resumed"))["partitions"]["0"] == [1, 2]

    await until(resumed)
    final = state(cluster, "resumed")
    assert final.leader == 1 and sorted(final.isr) == [1, 2]
    assert await listed(cluster) == {}


async def elect(cluster: Cluster, election_type: int, partitions, version: int = 2,
                broker_id: int | None = None) -> tuple[int, dict[tuple[str, int], int]]:
    body = {"election_type": election_type, "timeout_ms": 5_000, "topic_partitions": None
            if partitions is None else [{"topic": t, "partitions": ps} for t, ps in partitions]}
    response = await request(cluster, controller_id(cluster) if broker_id is None else broker_id,
                             ELECT_LEADERS, version, body)
    return response.get("error_code", 0), {
        (r.topic, p.partition_id): p.error_code for r in response.replica_election_results
        for p in r.partition_result}


async def test_preferred_election_moves_leadership_back_after_a_failover(cluster):
    await create(cluster, "preferred", {0: [1, 0, 2]})
    assert await elect(cluster, PREFERRED, [("preferred", [0])]) == (
        0, {("preferred", 0): ErrorCode.ELECTION_NOT_NEEDED})
    assert await elect(cluster, PREFERRED, None) == (0, {})  # all: the not-needed left out
    await cluster.stop_broker(1)
    await until(lambda: state(cluster, "preferred").leader == 0)
    assert await elect(cluster, PREFERRED, [("preferred", [0]), ("gone", [3])]) == (0, {
        ("preferred", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ("gone", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
    await cluster.start_broker(1)
    await until(lambda: 1 in state(cluster, "preferred").isr)
    epoch = state(cluster, "preferred").leader_epoch
    assert await elect(cluster, PREFERRED, [("preferred", [0])], version=0) == (
        0, {("preferred", 0): 0})
    assert state(cluster, "preferred").leader == 1
    assert state(cluster, "preferred").leader_epoch == epoch + 1
    for broker in cluster.brokers.values():  # answered once every broker's metadata shows it
        assert broker.metadata_cache.partition_state("preferred", 0).leader == 1
    await led_here(cluster.brokers[1], "preferred")


async def test_unclean_election_lets_an_out_of_sync_replica_lead(cluster):
    await create(cluster, "unclean", {0: [1, 2]})
    assert await elect(cluster, UNCLEAN, [("unclean", [0])]) == (
        0, {("unclean", 0): ErrorCode.ELECTION_NOT_NEEDED})
    await cluster.stop_broker(2)
    await until(lambda: state(cluster, "unclean").isr == [1])
    await cluster.stop_broker(1)
    await until(lambda: state(cluster, "unclean").leader == -1)
    assert await elect(cluster, UNCLEAN, [("unclean", [0])]) == (
        0, {("unclean", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE})
    await cluster.start_broker(2)  # out of the ISR: a clean election cannot pick it
    await until(lambda: 2 in cluster.active_controller().live_brokers)
    assert state(cluster, "unclean").leader == -1
    assert await elect(cluster, UNCLEAN, [("unclean", [0])]) == (0, {("unclean", 0): 0})
    final = state(cluster, "unclean")
    assert final.leader == 2 and final.isr == [2]
    await led_here(cluster.brokers[2], "unclean")
