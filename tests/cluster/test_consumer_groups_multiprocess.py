"""KIP-848 consumer groups across three broker processes (real ZooKeeper): three confluent-kafka
consumers with `group.protocol=consumer` share a topic through the server-side assignor, one
leaves and the other two take its partitions over, and when the coordinator's process is killed
the next coordinator loads the group from `__consumer_offsets` and the members go on."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow
GROUP, TOPIC = "mp-kip848", "mp-kip848"


def test_consumer_group_protocol_across_processes_and_a_coordinator_killed(zk_connect, tmp_path):
    cluster = ProcessCluster(zk_connect, tmp_path, overrides={
        "offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3",
        "group.consumer.heartbeat.interval.ms": "300"})
    cluster.start()
    consumers: dict[str, Consumer] = {}
    try:
        cluster.wait_until_all_registered()
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})

        def produce(values: range) -> None:
            for i in values:
                producer.produce(TOPIC, b"%d" % i, partition=i % 3)
            assert producer.flush(30) == 0

        seen: set[bytes] = set()

        def poll_until(done, why: str) -> None:
            deadline = time.monotonic() + 90
            while not done():
                assert time.monotonic() < deadline, (why, {n: c.assignment()
                                                           for n, c in consumers.items()})
                for consumer in list(consumers.values()):
                    message = consumer.poll(0.05)
                    if message is not None and message.error() is None:
                        seen.add(message.value())

        def owned() -> list[int]:
            return sorted(len(c.assignment()) for c in consumers.values())

        def views() -> list[dict]:
            return [v for i in cluster.ids if i in alive
                    for v in cluster.control(i, "/groups") if v["group"] == GROUP]

        alive = set(cluster.ids)
        produce(range(30))
        for name in ("a", "b", "c"):
            consumers[name] = Consumer({
                "bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name,
                "group.protocol": "consumer", "auto.offset.reset": "earliest"})
            consumers[name].subscribe([TOPIC])
        poll_until(lambda: owned() == [1, 1, 1] and len(seen) == 30, "three members, 30 read")
        [view] = views()
        assert (view["type"], view["state"], len(view["members"])) == ("consumer", "Stable", 3)
        coordinator = view["coordinator"]
        # A member leaves: the two others take its partition over.
        consumers.pop("c").close()
        poll_until(lambda: owned() == [1, 2], "two members share the three partitions")
        # The coordinator's process is killed: the next coordinator loads the group from its
        # records and the members go on reading what comes.
        cluster.kill(coordinator)
        alive.discard(coordinator)
        produce(range(30, 60))
        poll_until(lambda: len(seen) == 60, "the records produced after the failover")
        wait_until(lambda: [(v["coordinator"] != coordinator, len(v["members"]))
                            for v in views()] == [(True, 2)], "the new coordinator's view")
        assert owned() == [1, 2]
    finally:
        for consumer in consumers.values():
            consumer.close()
        cluster.stop()
