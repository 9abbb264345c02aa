"""A failing disk in a multi-process cluster (real ZooKeeper): the leader process's log dir fails a
write halfway (ENOSPC) during an idempotent acks=all stream; the broker halts, as Kafka does when
its last log dir failed, and its process exits 1 after one log line saying so; leadership moves,
nothing acknowledged is lost or duplicated, and the restarted process recovers and rejoins."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.client_producers import create_replicated_topic, produce_confluent
from tests.harness import read_all
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow
HALT_LINE = b"Shutdown broker because all log dirs in"


@pytest.fixture
def cluster(zk_connect, tmp_path):
    c = ProcessCluster(zk_connect, tmp_path)
    c.start()
    c.wait_until_all_registered()  # every broker knows every other one
    yield c
    c.stop()


def state(cluster: ProcessCluster, topic: str, via: int) -> dict:
    return next(p for p in cluster.partitions(topic, via) if p["partition"] == 0)


def test_a_leader_process_whose_disk_fails_exits_and_nothing_acknowledged_is_lost(cluster):
    topic = "disk-fault-mp"
    create_replicated_topic(cluster.bootstrap, topic)
    wait_until(lambda: len(state(cluster, topic, 0)["isr"]) == 3, "a full ISR")
    failed: list[int] = []

    def on_sent(i: int) -> None:
        if i == 40:  # the leader's next append writes 30 bytes of its batch, then the disk is full
            leader = state(cluster, topic, 0)["leader"]
            failed.append(leader)
            fault = cluster.control(leader, "/disk-faults", "POST", {
                "broker": leader, "operation": "write", "errno": "ENOSPC", "after_bytes": 30})
            assert fault["errno"] == "ENOSPC"

    acked = produce_confluent(cluster.bootstrap, topic, on_sent, 100, idempotent=True)
    assert len(acked) == 100
    process = cluster.processes[failed[0]]
    assert process.wait(30) == 1
    log_text = (cluster.root / f"broker-{failed[0]}.log").read_bytes()
    assert log_text.count(HALT_LINE) == 1
    survivor = next(i for i in cluster.ids if i != failed[0])
    wait_until(lambda: state(cluster, topic, survivor)["leader"] not in (-1, failed[0]),
               "a new leader")
    assert read_all(f"127.0.0.1:{cluster.ports[survivor]}", topic) == acked

    cluster.start(failed[0])  # a new process: recovers the log, truncates, catches up, rejoins
    wait_until(lambda: failed[0] in state(cluster, topic, survivor)["isr"],
               "the restarted broker back in the ISR")
    assert read_all(cluster.bootstrap, topic) == acked


def test_one_of_two_log_dirs_failing_moves_only_its_leaderships(zk_connect, tmp_path):
    """Two log dirs per broker process: one failing offlines its partitions (the controller learns
    it through /log_dir_event_notification and the KAFKA_STORAGE_ERROR in the broker's LeaderAndIsr
    answer over TCP); the process keeps running and leading the other dir's partition."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    c = ProcessCluster(zk_connect, tmp_path, brokers=2, log_dirs=2)
    c.start()
    try:
        for i in c.ids:
            wait_until(lambda i=i: len([b for b in c.brokers(i) if b["alive"]]) == 2,
                       f"broker {i} to see two brokers")
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        admin.create_topics([NewTopic("two-dirs", -1, -1, replica_assignments={0: [0, 1], 1: [0, 1]})])
        admin.close()

        def leaders() -> dict[int, int]:
            return {p["partition"]: p["leader"] for p in c.partitions("two-dirs", 1)}

        wait_until(lambda: leaders() == {0: 0, 1: 0} and all(
            len(p["isr"]) == 2 for p in c.partitions("two-dirs", 1)), "broker 0 leading both")
        # Partition 1's dir (each dir holds one of the two: new logs go to the emptier dir). Broker
        # 1's metadata may show broker 0 leading before broker 0 has made the log: wait for it.
        [failing] = wait_until(lambda: [str(d) for d in c.log_dirs(0)
                                        if (d / "two-dirs-1").is_dir()], "partition 1's folder")
        assert not (Path(failing) / "two-dirs-0").exists()
        c.control(0, "/disk-faults", "POST", {"broker": 0, "operation": "write", "errno": "EIO",
                                              "log_dir": failing})
        producer = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", retries=20,
                                 retry_backoff_ms=100)
        assert producer.send("two-dirs", b"a", partition=1).get(timeout=30).offset == 0
        assert producer.send("two-dirs", b"b", partition=0).get(timeout=30).offset == 0
        producer.close()
        wait_until(lambda: leaders() == {0: 0, 1: 1} and [
            p["isr"] for p in sorted(c.partitions("two-dirs", 1), key=lambda p: p["partition"])
        ] == [[0, 1], [1]], "partition 1 led by broker 1 alone, partition 0 as before")
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)

        def offline() -> dict[int, list[int]]:  # as Metadata tells clients (UpdateMetadata over TCP)
            [topic] = admin.describe_topics(["two-dirs"])
            return {p["partition_index"]: p["offline_replicas"] for p in topic["partitions"]}

        wait_until(lambda: offline() == {0: [], 1: [0]}, "replica 0 of partition 1 offline")
        admin.close()
        assert c.processes[0].poll() is None  # still running: its other dir is fine
        assert HALT_LINE not in (c.root / "broker-0.log").read_bytes()
    finally:
        c.stop()
