"""Transactions across three broker processes (real ZooKeeper): the coordinator reaches the
partition leaders with WriteTxnMarkers over TCP; a confluent-kafka transactional producer commits
and aborts, and a read_committed consumer sees exactly the committed records; the coordinating
process's control API shows the id."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow


def test_commit_and_abort_across_processes(zk_connect, tmp_path):
    cluster = ProcessCluster(zk_connect, tmp_path, overrides={
        "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"})
    cluster.start()
    try:
        for i in cluster.ids:
            wait_until(lambda i=i: len([b for b in cluster.brokers(i) if b["alive"]]) == 3,
                       f"broker {i} to see three brokers")
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

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "mp-reader",
                             "isolation.level": "read_committed", "enable.auto.commit": False})
        consumer.assign([TopicPartition("mp-tx", p, 0) for p in range(3)])
        got: list[bytes] = []
        for _ in range(120):
            got += [m.value() for m in consumer.consume(100, timeout=0.25) if m.error() is None]
            if len(got) >= 10:
                break
        consumer.close()
        assert sorted(got) == sorted([b"kept-%d" % i for i in range(9)] + [b"last"])
        # Exactly one process coordinates the id; its control API shows it (ctl transactions).
        def views() -> list[tuple]:
            return [(v["transactional_id"], v["state"], v["producer_epoch"])
                    for i in cluster.ids for v in cluster.control(i, "/transactions")]

        wait_until(lambda: views() == [("mp", "CompleteCommit", 0)], "the id's completed state")
    finally:
        cluster.stop()
