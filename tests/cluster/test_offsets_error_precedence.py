"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords errors in Kafka 3.9's order, on an embedded
3-broker cluster over the raw protocol: the client's leader epoch is judged before leadership, the
debugging replica id may read a follower, a new leader whose high watermark lags the start of its
epoch answers OFFSET_NOT_AVAILABLE."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.cluster.test_replication import caught_up, create, partition
from tests.cluster.test_replication import cluster as cluster  # noqa: F401 (the fixture)
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import PRODUCE, produce_body

LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 2, 21, 23


async def list_offsets(port: int, wanted: list[tuple[str, int, int, int]], *, version: int = 9,
                       replica_id: int = -1) -> list[tuple[int, int]]:
    """(error, offset) per (topic, partition, timestamp, current leader epoch)."""
    client = await RawClient.connect(port)
    response = await client.request(LIST_OFFSETS, version, {
        "replica_id": replica_id, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "timestamp": ts,
                                        "current_leader_epoch": e}]}
            for t, p, ts, e in wanted]})
    await client.close()
    return [(p.error_code, p.offset) for t in response.topics for p in t.partitions]


async def produce(port: int, name: str, count: int, acks: int = -1) -> None:
    client = await RawClient.connect(port)
    for i in range(count):
        response = await client.request(PRODUCE, 9, produce_body(
            {(name, 0): encode_batch([(None, b"v%d" % i, [], 1_000 + i)])}, acks=acks))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    await client.close()


async def test_list_offsets_and_offset_for_leader_epoch_precedence(cluster):  # noqa: F811
    first, _ = await create(cluster, "prec")
    await produce(first.port, "prec", 3)
    # A failover, so that there is an older epoch to be fenced with.
    await cluster.stop_broker(first.broker_id)
    await until(lambda: cluster.active_controller() is not None and cluster.active_controller()
                .states[("prec", 0)].leader not in (-1, first.broker_id))
    leader = cluster.brokers[cluster.active_controller().states[("prec", 0)].leader]
    follower = next(b for i, b in cluster.brokers.items() if i not in (first.broker_id, leader.broker_id))
    await until(lambda: partition(leader, "prec").is_leader)
    epoch = partition(leader, "prec").leader_epoch
    await until(lambda: partition(follower, "prec").leader_epoch == epoch)
    assert epoch >= 1
    for timestamp, current_epoch, expected in (
        (-1, epoch - 1, ErrorCode.FENCED_LEADER_EPOCH),  # stale: fenced, even by a follower
        (-2, epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (-1, epoch, ErrorCode.NOT_LEADER_OR_FOLLOWER),   # current, but not the leader
    ):
        assert await list_offsets(follower.port, [("prec", 0, timestamp, current_epoch)]) == [
            (expected, -1)]
    assert await list_offsets(follower.port, [("prec", 5, -1, -1), ("nope", 0, -1, -1)]) == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)] * 2
    # The debugging replica id reads any replica, up to its log end offset.
    assert await list_offsets(follower.port, [("prec", 0, -1, -1)], replica_id=-2) == [
        (ErrorCode.NONE, 3)]
    # A partition listed twice, a timestamp the version does not know.
    assert await list_offsets(leader.port, [("prec", 0, -1, -1), ("prec", 0, -2, -1)]) == [
        (ErrorCode.INVALID_REQUEST, -1)] * 2
    assert await list_offsets(leader.port, [("prec", 0, -3, -1)], version=6) == [
        (ErrorCode.UNSUPPORTED_VERSION, -1)]
    assert await list_offsets(leader.port, [("prec", 0, -6, -1)]) == [
        (ErrorCode.UNSUPPORTED_VERSION, -1)]
    assert await list_offsets(leader.port, [("prec", 0, -3, epoch)], version=7) == [
        (ErrorCode.NONE, 2)]

    client = await RawClient.connect(follower.port)
    response = await client.request(OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": "prec", "partitions": [
            {"partition": 0, "current_leader_epoch": epoch - 1, "leader_epoch": epoch}]}]})
    await client.close()
    assert response.topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH


async def test_a_new_leader_with_a_lagging_high_watermark(cluster):  # noqa: F811
    leader, (f1, f2) = await create(cluster, "lag")
    await produce(leader.port, "lag", 2)
    await caught_up(leader, [f1, f2], "lag")
    # f1 gets three more records, f2 does not: the high watermark stays at 2 everywhere.
    f2.replica_manager.pause_replication()
    await produce(leader.port, "lag", 3, acks=1)
    await until(lambda: partition(f1, "lag").log_end_offset == 5)
    old_id = leader.broker_id
    cluster.brokers[old_id].replica_manager.pause_replication()
    await cluster.stop_broker(old_id)
    await until(lambda: cluster.active_controller() is not None
                and cluster.active_controller().states[("lag", 0)].leader not in (-1, old_id))
    new_leader = cluster.brokers[cluster.active_controller().states[("lag", 0)].leader]
    await until(lambda: partition(new_leader, "lag").is_leader)
    # f1 comes first in the assignment, so it is elected; f2, paused, cannot move the HW.
    assert new_leader is f1
    assert (partition(f1, "lag").log_end_offset, partition(f1, "lag").high_watermark) == (5, 2)
    assert await list_offsets(new_leader.port, [("lag", 0, -1, -1)]) == [
        (ErrorCode.OFFSET_NOT_AVAILABLE, -1)]
    assert (await list_offsets(new_leader.port, [("lag", 0, -2, -1)]))[0][0] == ErrorCode.NONE
    assert await list_offsets(new_leader.port, [("lag", 0, 1_003, -1)]) == [
        (ErrorCode.OFFSET_NOT_AVAILABLE, -1)]


async def test_delete_records_precedence(cluster):  # noqa: F811
    leader, (follower, _) = await create(cluster, "del")
    await produce(leader.port, "del", 3)
    await caught_up(leader, [follower], "del")

    async def delete(port: int, wanted: list[tuple[str, int, int]]) -> list[int]:
        c = await RawClient.connect(port)
        response = await c.request(DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "offset": o}]} for t, p, o in wanted]})
        await c.close()
        return [p.error_code for t in response.topics for p in t.partitions]

    assert await delete(leader.port, [("nope", 0, 1), ("del", 7, 1), ("del", 0, 4), ("del", 0, -2)]) == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.OFFSET_OUT_OF_RANGE]
    assert await delete(follower.port, [("del", 0, 1)]) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    await create(cluster, "del-compacted", {"cleanup.policy": "compact"})
    compacted_leader = cluster.brokers[cluster.active_controller().states[("del-compacted", 0)].leader]
    assert await delete(compacted_leader.port, [("del-compacted", 0, 0)]) == [
        ErrorCode.POLICY_VIOLATION]
