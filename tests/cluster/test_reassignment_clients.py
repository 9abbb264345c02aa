"""Reassignment and leader election through real admin clients over TCP, on a 3-broker embedded
cluster: kafka-python's KafkaAdminClient moves a partition from [0, 1] to [1, 2] while a
confluent-kafka idempotent acks=all producer keeps writing (no acknowledged record lost or
doubled, broker 0's replica folder deleted) and cancels another move; confluent-kafka's and
kafka-python's elect_leaders move leadership back to the preferred replica after a failover.
(confluent-kafka 2.16's AdminClient has no reassignment calls.)"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import ElectionType, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.harness import read_all


def wait_for(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.05)  # the cluster runs on its own thread and real time: look again shortly


def partition_view(cluster, topic: str) -> dict:
    [view] = cluster.call(lambda: cluster.cluster.partitions(topic))
    return view


def create(admin: KafkaAdminClient, cluster, topic: str, replicas: list[int]) -> None:
    admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={0: replicas},
                                  topic_configs={"min.insync.replicas": "2"})])
    wait_for(lambda: len(partition_view(cluster, topic)["isr"]) == len(replicas))


class LiveProducer:
    """A confluent-kafka idempotent acks=all producer writing in its own thread until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: list[bytes] = []
        self.errors: list = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                   "acks": "all", "linger.ms": 5, "retry.backoff.ms": 50,
                                   "message.timeout.ms": 60000})
        self._thread = threading.Thread(target=self._run, args=(topic,), daemon=True)
        self._thread.start()

    def _on_delivery(self, err, msg) -> None:
        (self.errors if err else self.acked).append(err or msg.value())

    def _run(self, topic: str) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(topic, value=b"live-%d" % i, on_delivery=self._on_delivery)
            i += 1
            self._producer.poll(0.002)
        assert self._producer.flush(60) == 0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


@pytest.mark.slow
def test_reassignment_under_a_live_idempotent_producer_loses_nothing(broker_factory):
    cluster = broker_factory(brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    topic = "moved-live"
    create(admin, cluster, topic, [0, 1])
    producer = LiveProducer(cluster.bootstrap, topic)
    wait_for(lambda: len(producer.acked) >= 200)

    result = admin.alter_partition_reassignments({TopicPartition(topic, 0): [1, 2]})
    assert result == {TopicPartition(topic, 0): None}
    wait_for(lambda: admin.list_partition_reassignments() == {})
    moved_at = len(producer.acked)
    wait_for(lambda: len(producer.acked) >= moved_at + 200)  # and it goes on, on the new leader
    producer.stop()

    assert producer.errors == []
    view = partition_view(cluster, topic)
    assert view["replicas"] == [1, 2] and view["leader"] == 1 and sorted(view["isr"]) == [1, 2]
    assert view["adding_replicas"] == [] and view["removing_replicas"] == []
    assert read_all(cluster.bootstrap, topic) == producer.acked  # each once, in order
    assert not (cluster.log_dir(0) / f"{topic}-0").exists()
    assert (cluster.log_dir(2) / f"{topic}-0").exists()
    admin.close()


def test_kafka_python_cancels_a_reassignment(broker_factory):
    cluster = broker_factory(brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    topic = "cancel-me"
    create(admin, cluster, topic, [0, 1])
    cluster.call(lambda: cluster.cluster.pause_replication(2))
    tp = TopicPartition(topic, 0)
    assert admin.alter_partition_reassignments({tp: [2, 1]}) == {tp: None}
    assert admin.list_partition_reassignments({topic: [0]}) == {
        tp: {"replicas": [2, 1, 0], "adding_replicas": [2], "removing_replicas": [0]}}
    view = partition_view(cluster, topic)
    assert view["adding_replicas"] == [2] and view["removing_replicas"] == [0]

    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    assert admin.list_partition_reassignments() == {}
    view = partition_view(cluster, topic)
    assert view["replicas"] == [1, 0] and view["leader"] == 0  # ORS, in RS's order
    assert not (cluster.log_dir(2) / f"{topic}-0").exists()
    errors = admin.alter_partition_reassignments({tp: None})
    assert errors[tp].__name__ == "NoReassignmentInProgressError"
    admin.close()


def test_clients_elect_the_preferred_leader_after_a_failover(broker_factory):
    cluster = broker_factory(brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    topic = "elected"
    create(admin, cluster, topic, [1, 2, 0])
    cluster.call(lambda: cluster.cluster.stop_broker(1))
    wait_for(lambda: partition_view(cluster, topic)["leader"] == 2)
    cluster.call(lambda: cluster.cluster.start_broker(1))
    wait_for(lambda: 1 in partition_view(cluster, topic)["isr"])
    assert partition_view(cluster, topic)["leader"] == 2

    ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    results = ck_admin.elect_leaders(ElectionType.PREFERRED,
                                     [CkTopicPartition(topic, 0)]).result(30)
    assert list(results.values()) == [None]
    assert partition_view(cluster, topic)["leader"] == 1

    response = admin.elect_leaders(0, {topic: [0]}, raise_errors=False)  # nothing left to do
    [[name, [partition]]] = [(r[0], r[1]) for r in response.replica_election_results]
    assert name == topic and partition[0] == 0 and partition[1] == 84  # ELECTION_NOT_NEEDED
    admin.close()
