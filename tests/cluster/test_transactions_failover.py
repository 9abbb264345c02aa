"""Transaction coordinator failover on a 3-broker cluster with a real confluent-kafka producer: the
coordinator's broker stops after PrepareCommit is written but before any leader has its marker;
the broker elected leader of the `__transaction_state` partition loads it and completes the
commit, and read_committed consumers then see the whole transaction."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.metadata.topic_names import TRANSACTION_STATE_TOPIC

OVERRIDES = {"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"}


def read_committed(bootstrap: str, topic: str, expect: int, rounds: int = 80) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got: list[bytes] = []
    for _ in range(rounds):
        got += [m.value() for m in consumer.consume(100, timeout=0.25) if m.error() is None]
        if len(got) >= expect:
            break
    consumer.close()
    return sorted(got)


@pytest.mark.slow
def test_a_new_coordinator_completes_a_prepared_commit(broker_factory):
    cluster = broker_factory(OVERRIDES, brokers=3)
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fo", 2, 3)])["fo"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fo-tx"})
    producer.init_transactions(30)
    [coordinator_id] = [b.broker_id for b in cluster.cluster.brokers.values()
                        if 0 in b.transaction_coordinator.manager.owned]
    faults = cluster.cluster.faults
    for broker_id in range(3):  # no leader takes a marker: the commit stays prepared
        faults.add(broker_id, "WriteTxnMarkers", disconnect=True)
    producer.begin_transaction()
    for i in range(6):
        producer.produce("fo", b"v%d" % i, partition=i % 2)
    producer.commit_transaction(30)  # answered once PrepareCommit is written
    old = cluster.cluster.brokers[coordinator_id].transaction_coordinator
    assert old.describe("fo-tx")[1].state.kafka_name == "PrepareCommit"
    assert read_committed(bootstrap, "fo", 1, rounds=8) == []  # held back: no marker anywhere

    cluster.call(lambda: cluster.cluster.stop_broker(coordinator_id))
    faults.clear()

    async def completed_elsewhere() -> str:
        while True:
            for b in cluster.cluster.brokers.values():
                if b.running and 0 in b.transaction_coordinator.manager.owned:
                    error, txn = b.transaction_coordinator.describe("fo-tx")
                    if txn is not None and txn.state.kafka_name == "CompleteCommit":
                        return f"{b.broker_id}"
            await asyncio.sleep(0.02)  # election and load run on real time here

    new_id = int(cluster.call(lambda: asyncio.wait_for(completed_elsewhere(), 30)))
    assert new_id != coordinator_id
    state = cluster.cluster.brokers[new_id].metadata_cache.partition_state(TRANSACTION_STATE_TOPIC, 0)
    assert state.leader == new_id
    assert read_committed(bootstrap, "fo", 6) == [b"v%d" % i for i in range(6)]
    # The producer goes on with the new coordinator.
    producer.begin_transaction()
    producer.produce("fo", b"after", partition=0)
    producer.commit_transaction(30)
    assert b"after" in read_committed(bootstrap, "fo", 7)


@pytest.mark.slow
def test_markers_follow_a_partition_leader_that_moves(broker_factory):
    cluster = broker_factory(OVERRIDES, brokers=3)
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fo", 2, 3)])["fo"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fo-leader"})
    producer.init_transactions(30)
    brokers = cluster.cluster.brokers
    [coordinator_id] = [b.broker_id for b in brokers.values()
                        if 0 in b.transaction_coordinator.manager.owned]
    leaders = {p: brokers[0].metadata_cache.partition_state("fo", p).leader for p in (0, 1)}
    partition = next(p for p, leader in leaders.items() if leader != coordinator_id)
    old_leader = leaders[partition]
    cluster.cluster.faults.add(old_leader, "WriteTxnMarkers", disconnect=True)
    producer.begin_transaction()
    for i in range(6):
        producer.produce("fo", b"v%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    coordinator = brokers[coordinator_id].transaction_coordinator
    assert coordinator.describe("fo-leader")[1].state.kafka_name == "PrepareCommit"

    cluster.call(lambda: cluster.cluster.stop_broker(old_leader))

    async def completed() -> None:
        while coordinator.describe("fo-leader")[1].state.kafka_name != "CompleteCommit":
            await asyncio.sleep(0.02)  # election on real time here

    cluster.call(lambda: asyncio.wait_for(completed(), 30))
    new_leader = brokers[coordinator_id].metadata_cache.partition_state("fo", partition).leader
    assert new_leader not in (-1, old_leader)
    assert read_committed(bootstrap, "fo", 6) == [b"v%d" % i for i in range(6)]
    cluster.cluster.faults.clear()


@pytest.mark.slow
def test_the_whole_cluster_restarts_with_an_open_and_a_prepared_transaction(broker_factory):
    cluster = broker_factory(OVERRIDES, brokers=3)
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fo", 2, 3)])["fo"].result(10)
    prepared = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fo-prepared"})
    still_open = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fo-open"})
    for producer in (prepared, still_open):
        producer.init_transactions(30)
        producer.begin_transaction()
    for i in range(4):
        prepared.produce("fo", b"p%d" % i, partition=i % 2)
    prepared.flush(30)
    for i in range(4):  # after the prepared ones: the open transaction holds back only itself
        still_open.produce("fo", b"o%d" % i, partition=i % 2)
    still_open.flush(30)
    for broker_id in range(3):
        cluster.cluster.faults.add(broker_id, "WriteTxnMarkers", disconnect=True)
    prepared.commit_transaction(30)  # PrepareCommit written, no marker anywhere
    assert read_committed(bootstrap, "fo", 1, rounds=8) == []

    cluster.restart()  # every broker stops and starts again (the faults do not survive)

    assert read_committed(bootstrap, "fo", 4) == [b"p0", b"p1", b"p2", b"p3"]
    still_open.commit_transaction(60)  # the open one goes on against the restarted cluster
    assert read_committed(bootstrap, "fo", 8) == sorted(
        [b"p%d" % i for i in range(4)] + [b"o%d" % i for i in range(4)])
