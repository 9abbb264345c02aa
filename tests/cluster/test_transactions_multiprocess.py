"""Transactions across three broker processes (real ZooKeeper): the coordinator reaches the
partition leaders with WriteTxnMarkers over TCP; a confluent-kafka transactional producer commits
and aborts, and a read_committed consumer sees exactly the committed records; the coordinating
process's control API shows the id. Then a transactions v2 producer (raw requests): each leader
adds its partition at the coordinator over TCP (AddPartitionsToTxn v5)."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.errors import ErrorCode
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_transactions_v2 import (
    FIND_COORDINATOR,
    TID,
    TOPIC,
    end_txn,
    init_producer,
    produce,
)
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow
METADATA = 3


def read_committed(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    for _ in range(120):
        got += [m.value() for m in consumer.consume(100, timeout=0.25) if m.error() is None]
        if len(got) >= count:
            break
    consumer.close()
    return got


async def v2_transactions(cluster: ProcessCluster) -> None:
    clients = {i: await RawClient.connect(cluster.ports[i]) for i in cluster.ids}
    try:
        some = clients[cluster.ids[0]]
        found = {}

        async def coordinator_found() -> bool:
            found["answer"] = await some.request(FIND_COORDINATOR, 3, {"key": TID, "key_type": 1})
            return found["answer"].error_code == ErrorCode.NONE

        await until(coordinator_found)
        coordinator = clients[found["answer"].node_id]
        pid, epoch = await init_producer(coordinator)
        metadata = await some.request(METADATA, 9, {
            "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})
        leaders = {p.partition_index: p.leader_id for p in metadata.topics[0].partitions}
        assert set(leaders.values()) == set(cluster.ids)  # two leaders ask over TCP
        for partition, leader in leaders.items():
            assert await produce(clients[leader], (pid, epoch), partition,
                                 b"v2-%d" % partition, 0) == ErrorCode.NONE
        assert await end_txn(coordinator, (pid, epoch), commit=True) == \
            (ErrorCode.NONE, pid, epoch + 1)
        # The bumped epoch's next transaction; the old epoch is fenced on every leader.
        for partition, leader in leaders.items():
            async def added(partition=partition, leader=leader) -> bool:  # once markers are in
                code = await produce(clients[leader], (pid, epoch + 1), partition,
                                     b"aborted-%d" % partition, 0)
                assert code in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS), code
                return code == ErrorCode.NONE

            await until(added)
            assert await produce(clients[leader], (pid, epoch), partition, b"stale", 1) == \
                ErrorCode.INVALID_PRODUCER_EPOCH
        assert await end_txn(coordinator, (pid, epoch + 1), commit=False) == \
            (ErrorCode.NONE, pid, epoch + 2)
    finally:
        for client in clients.values():
            await client.close()


def test_commit_and_abort_across_processes(zk_connect, tmp_path):
    cluster = ProcessCluster(zk_connect, tmp_path, overrides={
        "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"})
    cluster.start()
    try:
        cluster.wait_until_all_registered()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("mp-tx", 3, 3)])["mp-tx"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "mp"})
        producer.init_transactions(60)
        producer.begin_transaction()
        for i in range(9):
            producer.produce("mp-tx", b"kept-%d" % i, partition=i % 3)
        producer.commit_transaction(60)
        producer.begin_transaction()
        for i in range(3):
            producer.produce("mp-tx", b"dropped-%d" % i, partition=i % 3)
        producer.flush(60)
        producer.abort_transaction(60)
        producer.begin_transaction()
        producer.produce("mp-tx", b"last", partition=0)
        producer.commit_transaction(60)

        got = read_committed(cluster.bootstrap, "mp-tx", 3, 10)
        assert sorted(got) == sorted([b"kept-%d" % i for i in range(9)] + [b"last"])
        # Exactly one process coordinates the id; its control API shows it (ctl transactions).
        def views() -> list[tuple]:
            return [(v["transactional_id"], v["state"], v["producer_epoch"])
                    for i in cluster.ids for v in cluster.control(i, "/transactions")]

        wait_until(lambda: views() == [("mp", "CompleteCommit", 0)], "the id's completed state")

        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
        asyncio.run(v2_transactions(cluster))
        assert sorted(read_committed(cluster.bootstrap, TOPIC, 3, 3)) == \
            [b"v2-0", b"v2-1", b"v2-2"]
    finally:
        cluster.stop()
