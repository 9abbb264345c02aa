"""Fetch v16 (KIP-951) on a follower of a 3-broker embedded cluster: NOT_LEADER_OR_FOLLOWER and
FENCED_LEADER_EPOCH answers carry the current leader and epoch, and node_endpoints the leader's
address on the listener the request came in on; below v16 neither is sent."""

from __future__ import annotations

import pytest

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import CREATE_TOPICS, FETCH

METADATA = 3


@pytest.fixture
async def cluster(tmp_path):
    cluster = Cluster(cluster_config(tmp_path), 3)
    await cluster.start()
    for broker in cluster.brokers.values():
        await broker.metadata_cache.wait_for(lambda s: len(s.brokers) == 3, 10_000)
    yield cluster
    await cluster.stop()


def fetch_body(topic_id: bytes, epoch: int) -> dict:
    return {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "session_id": 0,
            "session_epoch": -1, "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": epoch}]}]}


async def test_a_follower_answers_with_the_leader_and_its_endpoint(cluster):
    client = await RawClient.connect(cluster.brokers[0].port)
    response = await client.request(CREATE_TOPICS, 7, {"topics": [{
        "name": "hint", "num_partitions": 1, "replication_factor": 3, "configs": []}],
        "timeout_ms": 10_000})
    assert response.topics[0].error_code == 0, response
    await until(lambda: all(("hint", 0) in b.replica_manager.partitions
                            for b in cluster.brokers.values()))
    meta = await client.request(METADATA, 12, {"topics": [{"name": "hint"}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
    await client.close()
    tid = bytes(meta.topics[0].topic_id)
    leader_id, leader_epoch = meta.topics[0].partitions[0].leader_id, \
        meta.topics[0].partitions[0].leader_epoch
    leader = cluster.brokers[leader_id]
    follower = next(b for b in cluster.brokers.values() if b.broker_id != leader_id)

    client = await RawClient.connect(follower.port)
    answer = await client.request(FETCH, 16, fetch_body(tid, -1))
    (part,) = answer.responses[0].partitions
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
        leader_id, leader_epoch)
    assert [(n.node_id, n.port) for n in answer.node_endpoints] == [(leader_id, leader.port)]
    older = await client.request(FETCH, 15, fetch_body(tid, -1))
    (part,) = older.responses[0].partitions
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader.leader_id == -1  # no hint below v16 (the field's default)
    await client.close()

    # On the leader an older epoch is FENCED_LEADER_EPOCH, hinted the same way; a good fetch is not.
    client = await RawClient.connect(leader.port)
    if leader_epoch > 0:
        fenced = await client.request(FETCH, 17, fetch_body(tid, leader_epoch - 1))
        (part,) = fenced.responses[0].partitions
        assert part.error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert part.current_leader.leader_id == leader_id
    good = await client.request(FETCH, 17, fetch_body(tid, leader_epoch))
    assert good.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert not good.node_endpoints and bytes(good.responses[0].topic_id) == tid
    await client.close()
