"""OffsetForLeaderEpoch (API 23) over raw TCP: end offsets per epoch, fencing, unknown partitions."""

from __future__ import annotations

from broker.metadata.partition_state import LeaderAndIsr
from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import PRODUCE, create_topic, produce_body

OFFSET_FOR_LEADER_EPOCH = 23
TOPIC = "epochs"


def request_body(*partitions: tuple[str, int, int, int]) -> dict:
    """(topic, partition, current_leader_epoch, leader_epoch) per partition asked about."""
    topics: dict[str, list] = {}
    for topic, partition, current, epoch in partitions:
        topics.setdefault(topic, []).append(
            {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}
        )
    return {"replica_id": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}  # fmt: skip


def answers(response) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (error_code, leader_epoch, end_offset)."""
    return {
        (t.topic, p.partition): (p.error_code, p.leader_epoch, p.end_offset)
        for t in response.topics
        for p in t.partitions
    }


async def produce(client: RawClient, records: int) -> None:
    batch = encode_batch([(None, b"v", [], 1_000 + i) for i in range(records)])
    response = await client.request(PRODUCE, 9, produce_body({(TOPIC, 0): batch}))
    assert response.responses[0].partition_responses[0].error_code == 0, response


def bump_leader_epoch(broker, epoch: int) -> None:
    """What the controller does on a leader election, applied to this (only) broker directly."""
    rm = broker.replica_manager
    me = broker.broker_id
    state = LeaderAndIsr(TOPIC, 0, me, epoch, [me], [me])
    errors = broker.apply_leader_and_isr_now(
        rm.controller_epoch, [state], {TOPIC: broker.log_manager.config_for(TOPIC)}
    )
    assert errors[(TOPIC, 0)] == ErrorCode.NONE


async def test_epoch_end_offsets_after_producing(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, TOPIC, 2)
    await produce(client, 3)
    await produce(client, 2)
    log = async_broker.replica_manager.partitions[(TOPIC, 0)].log
    assert log.log_end_offset == 5
    for version in (2, 3, 4):
        response = await client.request(
            OFFSET_FOR_LEADER_EPOCH, version, request_body((TOPIC, 0, 0, 0), (TOPIC, 1, -1, 0))
        )
        assert response.throttle_time_ms == 0
        # Epoch 0 is the leader's latest: it ends at the log end offset; an empty partition too.
        assert answers(response) == {(TOPIC, 0): (0, 0, 5), (TOPIC, 1): (0, 0, 0)}

    bump_leader_epoch(async_broker, 1)
    await produce(client, 4)
    response = await client.request(OFFSET_FOR_LEADER_EPOCH, 4, request_body(
        (TOPIC, 0, 1, 0), (TOPIC, 0, -1, 1)))  # fmt: skip
    rows = [(p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]
    assert rows == [(0, 0, 5), (0, 1, 9)]  # epoch 0 now ends where epoch 1 starts
    response = await client.request(OFFSET_FOR_LEADER_EPOCH, 4, request_body((TOPIC, 0, 1, 7)))
    assert answers(response) == {(TOPIC, 0): (0, -1, -1)}  # an epoch above every known one
    await client.close()


async def test_unknown_partitions(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, TOPIC, 1)
    response = await client.request(OFFSET_FOR_LEADER_EPOCH, 4, request_body(
        (TOPIC, 0, -1, 0), (TOPIC, 5, -1, 0), ("no-such-topic", 0, -1, 0)))  # fmt: skip
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert answers(response) == {
        (TOPIC, 0): (0, 0, 0),
        (TOPIC, 5): (unknown, -1, -1),
        ("no-such-topic", 0): (unknown, -1, -1),
    }
    await client.close()


async def test_current_leader_epoch_fences(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, TOPIC, 1)
    await produce(client, 2)
    bump_leader_epoch(async_broker, 3)
    for version in (2, 4):
        response = await client.request(OFFSET_FOR_LEADER_EPOCH, version, request_body(
            (TOPIC, 0, 4, 0)))  # fmt: skip
        assert answers(response) == {(TOPIC, 0): (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)}
        response = await client.request(OFFSET_FOR_LEADER_EPOCH, version, request_body(
            (TOPIC, 0, 2, 0)))  # fmt: skip
        assert answers(response) == {(TOPIC, 0): (ErrorCode.FENCED_LEADER_EPOCH, -1, -1)}
        response = await client.request(OFFSET_FOR_LEADER_EPOCH, version, request_body(
            (TOPIC, 0, 3, 0)))  # fmt: skip
        assert answers(response) == {(TOPIC, 0): (0, 0, 2)}
    await client.close()
