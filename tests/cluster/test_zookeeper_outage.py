"""Three broker processes through a ZooKeeper outage (its process frozen with SIGSTOP): the leaders
keep serving acks=all produce and fetch while their ISR is whole, a loaded group's coordinator
keeps taking its offset commits, a broker told to stop gives its controlled shutdown up after its
retries and exits, and once ZooKeeper is back (the sessions expired meanwhile) the brokers
register again, a controller is elected and produce goes on."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.server.zookeeper_runner import ZooKeeperServer
from tests.cluster.client_producers import create_replicated_topic
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow
TOPIC = "through-outage"
SESSION_TIMEOUT_MS = 3000


@pytest.fixture
def own_zookeeper(tmp_path):
    """A ZooKeeper of this test's own: freezing the session's one would stall other tests."""
    server = ZooKeeperServer(tmp_path / "zookeeper")
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGCONT)
    server.stop()


def produce_all(bootstrap: str, values: list[bytes], timeout_s: float) -> list[bytes]:
    """acks=all produce of `values`; the values whose delivery was confirmed."""
    acked: list[bytes] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": int(timeout_s * 1000), "linger.ms": 0})
    for value in values:
        producer.produce(TOPIC, value, partition=0,
                         on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    producer.flush(timeout_s + 5)
    return acked


def fetch_all(bootstrap: str, count: int, timeout_s: float) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "outage-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.close()
    return seen


def committed(consumer: Consumer) -> int:
    [position] = consumer.committed([TopicPartition(TOPIC, 0)], timeout=20)
    return position.offset


def test_leaders_serve_and_a_stopping_broker_exits_through_a_zookeeper_outage(own_zookeeper,
                                                                                tmp_path):
    cluster = ProcessCluster(f"{own_zookeeper.connect_string}/outage", tmp_path / "cluster",
                             overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    cluster.start()
    try:
        create_replicated_topic(cluster.bootstrap, TOPIC)
        wait_until(lambda: len(cluster.partitions(TOPIC, 0)[0]["isr"]) == 3, "a whole ISR")
        leader = cluster.partitions(TOPIC, 0)[0]["leader"]
        assert produce_all(cluster.bootstrap, [b"before"], 30) == [b"before"]
        # A group its coordinator has loaded (made before: the offsets topic is created in
        # ZooKeeper on first use)
        group = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "outage-group",
                          "enable.auto.commit": False})
        group.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        assert committed(group) == 1

        os.kill(own_zookeeper.process.pid, signal.SIGSTOP)
        # Twice the session timeout: every session expires while ZooKeeper is away.
        outage_ends = time.monotonic() + 2 * SESSION_TIMEOUT_MS / 1000 + 3
        during = [b"during-%d" % n for n in range(30)]
        assert produce_all(cluster.bootstrap, during, 20) == during
        assert fetch_all(cluster.bootstrap, 31, 20) == [b"before", *during]
        group.commit(offsets=[TopicPartition(TOPIC, 0, 31)], asynchronous=False)
        assert committed(group) == 31  # the coordinator needs nothing of ZooKeeper
        group.close()

        stopping = next(i for i in cluster.ids if i != leader)
        os.kill(cluster.processes[stopping].pid, signal.SIGTERM)
        # controlled shutdown: 3 tries 200 ms apart, each refused or timed out; then it exits
        cluster.wait_exit(stopping, 60)
        assert time.monotonic() < outage_ends + 60
        time.sleep(max(0.0, outage_ends - time.monotonic()))
    finally:
        os.kill(own_zookeeper.process.pid, signal.SIGCONT)
    try:
        alive = [i for i in cluster.ids if i != stopping]
        for i in alive:  # each registered again in a new session
            wait_until(lambda i=i: cluster.registered(i, via=alive[0]), f"broker {i} back")
        wait_until(lambda: any(b["controller"] for b in cluster.brokers(alive[0])),
                   "a controller")
        # It exited while ZooKeeper was frozen: its session ends when ZooKeeper expires it, and
        # a broker started before that refuses to ("already registered"), as Kafka's does.
        wait_until(lambda: not cluster.registered(stopping, via=alive[0]),
                   "the stopped broker's old session to end")
        cluster.start(stopping)
        after = [b"after-%d" % n for n in range(5)]
        assert produce_all(cluster.bootstrap, after, 60) == after
        assert fetch_all(cluster.bootstrap, 36, 60) == [b"before", *during, *after]
    finally:
        cluster.stop()
