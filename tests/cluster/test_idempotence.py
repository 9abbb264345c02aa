"""Idempotent producers end to end: kafka-python, confluent-kafka and aiokafka with idempotence on
and acks=all; lost responses (the leader drops them after appending) and a leader failover make
the clients retry, and every record is stored exactly once, in send order. Raw-protocol checks of
the error codes, and a long-lived producer across a whole-cluster restart."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer

from broker.control.control_client import ControlClient
from protocol.errors import ErrorCode
from protocol.records import encode_batch, iter_batches
from tests.cluster.client_producers import PRODUCERS, create_replicated_topic
from tests.harness import read_all
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import PRODUCE, create_topic, produce_body

INIT_PRODUCER_ID = 22
COUNT = 60


@pytest.mark.slow
@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_retries_after_lost_responses_are_deduplicated(broker_factory, client):
    cluster = broker_factory(brokers=3, control=True)
    control = ControlClient(cluster.control.url)
    topic = f"dedup-{client}"
    create_replicated_topic(cluster.bootstrap, topic)
    [state] = control.partitions(topic)
    dropped = 3

    def on_sent(i: int) -> None:
        if i == 20:  # the next 3 produce requests are appended, then their connections cut
            control.add_fault(state["leader"], "Produce", drop_response=True, count=dropped)

    acked = PRODUCERS[client](cluster.bootstrap, topic, on_sent, COUNT, idempotent=True)
    assert control.faults() == []  # every drop was used: the client really retried 3 times
    stored = read_all(cluster.bootstrap, topic)
    assert stored == acked and len(stored) == COUNT  # exactly once, in send order
    [after] = control.partitions(topic)
    [producer] = after["producers"]
    # No epoch bump, no sequence reset: the broker recognised the retries itself.
    assert (producer["epoch"], producer["last_sequence"], producer["last_offset"]) == (
        0, COUNT - 1, COUNT - 1)


@pytest.mark.slow
@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_every_acknowledged_record_once_through_a_leader_failover(broker_factory, client):
    cluster = broker_factory(brokers=3, control=True)
    control = ControlClient(cluster.control.url)
    topic = f"idem-failover-{client}"
    create_replicated_topic(cluster.bootstrap, topic)
    [before] = control.partitions(topic)
    old_leader = before["leader"]

    def on_sent(i: int) -> None:
        if i == 20:  # one lost response first, so that a retry is pending at the failover
            control.add_fault(old_leader, "Produce", drop_response=True, count=1)
        if i == COUNT // 2:
            control.stop_broker(old_leader)

    acked = PRODUCERS[client](cluster.bootstrap, topic, on_sent, COUNT, idempotent=True)
    assert len(acked) == COUNT
    [during] = control.partitions(topic)
    assert during["leader"] not in (-1, old_leader)
    assert read_all(cluster.bootstrap, topic) == acked
    [producer] = during["producers"]  # the new leader built the state as a follower
    assert producer["last_offset"] == COUNT - 1


# -- raw protocol --------------------------------------------------------------------------------


async def init_producer_id(client: RawClient, version: int = 4, producer_id: int = -1,
                           epoch: int = -1):
    return await client.request(INIT_PRODUCER_ID, version, {
        "transactional_id": None, "transaction_timeout_ms": 60000,
        "producer_id": producer_id, "producer_epoch": epoch})


def idem(pid: int, epoch: int, seq: int, n: int = 1) -> bytes:
    return encode_batch([(None, b"s%d" % (seq + i), [], None) for i in range(n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)


async def produce(client: RawClient, records: bytes, version: int = 9, topic: str = "seq"):
    response = await client.request(PRODUCE, version, produce_body({(topic, 0): records}))
    return response.responses[0].partition_responses[0]


async def test_sequence_errors_and_duplicates_over_the_wire(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "seq")
    log = async_broker.replica_manager.partitions[("seq", 0)].log
    got = await init_producer_id(client)
    assert got.error_code == 0 and got.producer_epoch == 0
    pid = got.producer_id
    assert (await produce(client, idem(pid, 0, 0, 3))).base_offset == 0
    # A gap: refused, nothing written.
    gap = await produce(client, idem(pid, 0, 5))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and log.log_end_offset == 3
    # A retry: NONE with the original base offset, nothing written.
    retry = await produce(client, idem(pid, 0, 0, 3))
    assert (retry.error_code, retry.base_offset, log.log_end_offset) == (0, 0, 3)
    # An unknown producer not starting at 0: UNKNOWN_PRODUCER_ID, or OUT_OF_ORDER before v5.
    assert (await produce(client, idem(pid + 1, 0, 7))).error_code == ErrorCode.UNKNOWN_PRODUCER_ID
    assert (await produce(client, idem(pid + 1, 0, 7), version=4)).error_code == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # InitProducerId naming this producer's id and epoch (KIP-360) gets a fresh id at epoch 0,
    # as Kafka's coordinator answers without a transactional id: no client can bump, and so
    # fence, an idempotent producer whose id it learnt.
    fresh = await init_producer_id(client, 4, pid, 0)
    assert (fresh.error_code, fresh.producer_epoch) == (0, 0) and fresh.producer_id != pid
    assert (await produce(client, idem(fresh.producer_id, 0, 0))).base_offset == 3
    log.truncate_to(3)  # (the next checks start from the first producer's three records)
    # A batch at a higher epoch starts again at 0 (a gap is refused); the old epoch is fenced.
    assert (await produce(client, idem(pid, 1, 1))).error_code == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (await produce(client, idem(pid, 1, 0))).base_offset == 3
    assert (await produce(client, idem(pid, 0, 3))).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    # Kafka allows one batch per partition from v3 on.
    two = await produce(client, idem(pid, 1, 1) + idem(pid, 1, 2))
    assert two.error_code == ErrorCode.INVALID_RECORD and log.log_end_offset == 4
    await client.close()


async def test_init_producer_id_versions(async_broker):
    client = await RawClient.connect(async_broker.port)
    first = await init_producer_id(client, version=0)
    second = await init_producer_id(client, version=2)
    assert second.producer_id == first.producer_id + 1 and second.producer_epoch == 0
    half = await init_producer_id(client, 4, first.producer_id, -1)
    assert half.error_code == ErrorCode.INVALID_REQUEST
    for pid, epoch in ((first.producer_id, 0), (first.producer_id, 32766), (10**12, 3)):
        fresh = await init_producer_id(client, 4, pid, epoch)  # never a bump: a fresh id
        assert fresh.producer_epoch == 0 and fresh.producer_id not in (pid, -1), (pid, epoch)
    await client.close()


@pytest.mark.slow
def test_a_long_lived_producer_survives_a_whole_cluster_restart(broker_factory):
    cluster = broker_factory(brokers=3)
    topic = "restart"
    create_replicated_topic(cluster.bootstrap, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 0, "retry.backoff.ms": 100,
                         "message.timeout.ms": 60000})

    def send(values: list[bytes]) -> None:
        errors: list = []
        for value in values:
            producer.produce(topic, value=value, on_delivery=lambda err, _: err and errors.append(err))
        assert producer.flush(60) == 0 and errors == []

    def producers() -> list[dict]:
        [state] = cluster.call(lambda: cluster.cluster.partitions(topic))
        return state["producers"]

    first, second = [b"a-%d" % i for i in range(10)], [b"b-%d" % i for i in range(10)]
    send(first)
    [before] = producers()
    cluster.restart()
    cluster.call(lambda: until_leader(cluster, topic))
    assert producers() == [before]  # rebuilt on every replica from snapshots and logs
    send(second)
    [after] = producers()
    assert (after["producer_id"], after["epoch"], after["last_sequence"]) == (
        before["producer_id"], 0, 19)  # accepted in sequence: no reset, no epoch bump

    # Replaying the producer's first stored batch is recognised as a duplicate.
    async def first_batch() -> tuple[int, bytes]:
        [state] = await cluster.cluster.partitions(topic)
        log = cluster.cluster.brokers[state["leader"]].replica_manager.partitions[(topic, 0)].log
        data = log.read(0, 1 << 20).records
        pos, header = next(iter_batches(data))
        return state["leader"], data[pos : pos + header.size]

    leader, batch = cluster.call(first_batch)

    async def replay():
        client = await RawClient.connect(cluster.cluster.brokers[leader].port)
        try:
            return await produce(client, batch, topic=topic)
        finally:
            await client.close()

    answer = asyncio.run(replay())
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    assert read_all(cluster.bootstrap, topic) == first + second


async def until_leader(cluster, topic: str) -> None:
    for _ in range(600):
        states = await cluster.cluster.partitions(topic)
        if states and states[0]["leader"] >= 0 and len(states[0]["isr"]) == 3:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no leader after the restart")
