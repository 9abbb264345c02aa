"""Share groups across three broker processes (real ZooKeeper): two confluent-kafka
ShareConsumers read a topic's records once each, each partition's leader keeping its share partition
and writing its state to the share coordinator of another process over TCP; when a leader's
process is killed, the new leader goes on from that state; a rejected record is archived and one
whose lock runs out goes to another consumer; the coordinating process's control API shows the
group."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.integration.test_share_groups import (
    ACCEPT,
    REJECT,
    RELEASE,
    poll_some,
    read_from_earliest,
    share_consumer,
)
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow


def test_share_consumers_across_processes_and_a_leader_killed(zk_connect, tmp_path):
    cluster = ProcessCluster(zk_connect, tmp_path, overrides={
        "offsets.topic.num.partitions": "3", "share.coordinator.state.topic.num.partitions": "3"})
    cluster.start()
    try:
        cluster.wait_until_all_registered()
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("mp-share", 3, 3)])["mp-share"].result(30)
        read_from_earliest(bootstrap, "mp-sharers")
        consumers = [share_consumer(bootstrap, "mp-sharers", "mp-share") for _ in range(2)]

        def members() -> list[int]:
            return [len(v["members"]) for i in cluster.ids for v in cluster.control(i, "/groups")
                    if v["group"] == "mp-sharers"]

        deadline = time.monotonic() + 60
        while members() != [2]:  # the coordinating process's view: both joined
            assert time.monotonic() < deadline, members()
            for consumer in consumers:
                consumer.poll(0.1)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("mp-share", b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        # Each record once; those of partition 0 released the first time
        by: dict[bytes, list[int]] = {}
        deadline = time.monotonic() + 60
        while len(by) < 30 or any(len(c) < 2 for v, c in by.items() if int(v) % 3 == 0):
            assert time.monotonic() < deadline, sorted(by)
            for n, consumer in enumerate(consumers):
                for m in consumer.poll(0.1):
                    by.setdefault(m.value(), []).append(n)
                    first_time = len(by[m.value()]) == 1
                    consumer.acknowledge(m, RELEASE if first_time and m.partition() == 0
                                         else ACCEPT)
                consumer.commit_sync()
        assert {len(c) for v, c in by.items() if int(v) % 3 != 0} == {1}
        # (Which consumer gets which record is not asserted: a consumer's share session keeps
        # the partitions of its earlier assignment until librdkafka forgets them, so either may
        # acquire any record first. test_share_groups.py shows two consumers sharing, held.)
        # ctl: the coordinating process shows the share group and its two members
        views = [v for i in cluster.ids for v in cluster.control(i, "/groups")
                 if v["group"] == "mp-sharers"]
        assert [(v["type"], len(v["members"])) for v in views] == [("share", 2)]
        for consumer in consumers:
            consumer.close()
        # Records produced, the leader of partition 1 killed: the new leader starts the share
        # partition from the kept state, so only the new records are delivered.
        for i in range(30, 36):
            producer.produce("mp-share", b"%d" % i, partition=1)
        assert producer.flush(30) == 0
        survivor = cluster.ids[0]
        (leader,) = [p["leader"] for p in cluster.partitions("mp-share", survivor)
                     if p["partition"] == 1]
        if leader == survivor:
            survivor = cluster.ids[1]
        cluster.kill(leader)
        wait_until(lambda: [p["leader"] for p in cluster.partitions("mp-share", survivor)
                            if p["partition"] == 1] not in ([leader], [-1]),
                   "a new leader of mp-share-1")
        late = share_consumer(bootstrap, "mp-sharers", "mp-share")
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 6:
            assert time.monotonic() < deadline, got
            for m in late.poll(0.2):
                got.append(m.value())
                late.acknowledge(m, ACCEPT)
            late.commit_sync()
        assert sorted(got, key=int) == [b"%d" % i for i in range(30, 36)]
        late.close()
        # A rejected record is archived; one whose lock (1 s here) runs out while its holder
        # does nothing is delivered to another consumer, its delivery count up by one. (A
        # topic of one partition, on the two brokers left: both members are given it.) A new
        # admin client: librdkafka's sends CreateTopics to the controller it last heard of, and
        # the killed broker may have been the controller (the old one kept connecting to it).
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("mp-locks", 1, 2)])["mp-locks"].result(30)
        read_from_earliest(bootstrap, "mp-lockers")
        lock = ConfigResource(ResourceType.GROUP, "mp-lockers", incremental_configs=[
            ConfigEntry("share.record.lock.duration.ms", "1000",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([lock])[lock].result(30)
        for value in (b"kept", b"rejected"):
            producer.produce("mp-locks", value)
        assert producer.flush(30) == 0
        holder = share_consumer(bootstrap, "mp-lockers", "mp-locks")
        held: list = []
        deadline = time.monotonic() + 60
        while {m.value() for m in held} != {b"kept", b"rejected"}:
            assert time.monotonic() < deadline, [m.value() for m in held]
            for m in holder.poll(0.2):
                held.append(m)
                if m.value() == b"rejected":
                    holder.acknowledge(m, REJECT)
            holder.commit_sync()
        assert {m.delivery_count() for m in held} == {1}
        other = share_consumer(bootstrap, "mp-lockers", "mp-locks")
        again = [(m.value(), m.delivery_count()) for m in poll_some(other, timeout_s=60)]
        assert again == [(b"kept", 2)]
        other.close()
        holder.close()
    finally:
        cluster.stop()
