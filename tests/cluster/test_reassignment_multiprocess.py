"""Reassignment and ElectLeaders across three broker processes and a real ZooKeeper: two moves at
once through kafka-python's admin (one completes, its removed replica's folder deleted by a
StopReplica over TCP; one waits for a paused follower), the controller's process killed mid-move
and the new controller resuming it from the topic node, then a preferred election through
confluent-kafka moving leadership back to the restarted broker."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.harness import read_all
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow
TOPIC = "zk-moved"


@pytest.fixture
def cluster(zk_connect, tmp_path):
    c = ProcessCluster(zk_connect, tmp_path)
    c.start()
    c.wait_until_all_registered()
    yield c
    c.stop()


def partition(cluster: ProcessCluster, via: int, index: int) -> dict:
    return next(p for p in cluster.partitions(TOPIC, via) if p["partition"] == index)


def test_reassignment_survives_a_controller_failover_and_elections_follow(cluster):
    first = next(b for b in cluster.brokers(0) if b["controller"])
    c = first["id"]
    a, b = sorted(set(cluster.ids) - {c})
    bootstrap_ab = f"127.0.0.1:{cluster.ports[a]},127.0.0.1:{cluster.ports[b]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={
        0: [c, a], 1: [a, b], 2: [c, a]})])
    for i in (0, 1, 2):
        wait_until(lambda i=i: len(partition(cluster, a, i)["isr"]) == 2,
                   f"partition {i} in sync")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    sent = {i: [b"p%d-%d" % (i, n) for n in range(20)] for i in (0, 1, 2)}
    for i, values in sent.items():
        for value in values:
            producer.send(TOPIC, value=value, partition=i)
    producer.flush()
    producer.close()

    cluster.control(b, f"/replication/{b}/pause", "POST", {})
    p0, p1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    assert admin.alter_partition_reassignments({p0: [a, b], p1: [a, c]}) == {p0: None, p1: None}
    # p1 needs nothing from b: it completes, and b (still alive) deletes its replica
    wait_until(lambda: partition(cluster, a, 1)["replicas"] == [a, c], "p1 moved")
    wait_until(lambda: not (cluster.root / f"broker-{b}" / f"{TOPIC}-1").exists(),
               "b's p1 folder deleted")
    moving = partition(cluster, a, 0)
    assert moving["replicas"] == [a, b, c]
    assert moving["adding_replicas"] == [b] and moving["removing_replicas"] == [c]
    assert admin.list_partition_reassignments() == {
        p0: {"replicas": [a, b, c], "adding_replicas": [b], "removing_replicas": [c]}}
    admin.close()

    cluster.kill(c)  # the controller, p0's leader and the replica it loses
    wait_until(lambda: any(x["controller"] and x["controller_epoch"] > first["controller_epoch"]
                           for x in cluster.brokers(a)), "a new controller")
    wait_until(lambda: partition(cluster, a, 0)["leader"] == a, "p0 led by a")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_ab)
    assert admin.list_partition_reassignments() == {
        p0: {"replicas": [a, b, c], "adding_replicas": [b], "removing_replicas": [c]}}
    cluster.control(b, f"/replication/{b}/resume", "POST", {})
    wait_until(lambda: admin.list_partition_reassignments() == {}, "p0's move to complete")
    done = partition(cluster, a, 0)
    assert done["replicas"] == [a, b] and sorted(done["isr"]) == [a, b]
    assert done["adding_replicas"] == [] and done["removing_replicas"] == []
    admin.close()
    for i, values in sent.items():
        assert read_all(bootstrap_ab, TOPIC, i) == values

    # p2's preferred replica is c: back and in sync, a preferred election hands it leadership
    assert partition(cluster, a, 2)["leader"] != c
    cluster.start(c)
    wait_until(lambda: c in partition(cluster, a, 2)["isr"], "c back in p2's ISR")
    ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    results = ck_admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(TOPIC, 2)]).result(30)
    assert list(results.values()) == [None]
    wait_until(lambda: partition(cluster, a, 2)["leader"] == c, "p2 led by c again")
