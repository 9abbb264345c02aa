"""Three broker processes coordinated through a real ZooKeeper: the three Python clients produce and
consume; a topic created through one broker shows on all; kill -9 of a leader during an idempotent
acks=all stream loses and duplicates nothing and the restarted process rejoins the ISR; kill -9 of
the controller's process elects a new controller with a higher epoch, and the old epoch is refused
over TCP; a broker whose ZooKeeper session expires (SIGSTOP) is dropped, then rejoins; a broker
asked to stop (SIGTERM, or ControlledShutdown) hands its leaderships over first."""

from __future__ import annotations

import asyncio
import signal
import urllib.error

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from broker.controller.wire import LEADER_AND_ISR, leader_and_isr_body
from broker.interbroker.controlled_shutdown import CONTROLLED_SHUTDOWN
from broker.metadata.partition_state import LeaderAndIsr
from protocol.errors import ErrorCode
from tests.cluster.client_producers import PRODUCERS, create_replicated_topic
from tests.harness import read_all
from tests.integration.raw_client import RawClient
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(zk_connect, tmp_path):
    c = ProcessCluster(zk_connect, tmp_path)
    c.start()
    c.wait_until_all_registered()  # every broker knows every other one
    yield c
    c.stop()


def leader_of(cluster: ProcessCluster, topic: str, via: int, partition: int = 0) -> dict:
    return next(p for p in cluster.partitions(topic, via) if p["partition"] == partition)


def test_three_clients_produce_and_consume_across_processes(cluster):
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{cluster.ports[1]}")
    admin.create_topics([NewTopic("shared", num_partitions=3, replication_factor=3)])
    admin.close()
    for i in cluster.ids:  # created through broker 1, known to all
        wait_until(lambda i=i: len(cluster.partitions("shared", i)) == 3, f"broker {i} metadata")
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{cluster.ports[i]}")
        assert consumer.partitions_for_topic("shared") == {0, 1, 2}
        consumer.close()

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for n in range(30):
        producer.send("shared", value=b"kp-%d" % n)
    producer.close()
    confluent = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for n in range(30):
        confluent.produce("shared", value=b"ck-%d" % n)
    assert confluent.flush(30) == 0

    async def aiokafka_round() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        await p.start()
        for n in range(30):
            await p.send_and_wait("shared", b"ak-%d" % n)
        await p.stop()
        c = AIOKafkaConsumer("shared", bootstrap_servers=cluster.bootstrap,
                             auto_offset_reset="earliest")
        await c.start()
        seen: list[bytes] = []
        try:
            while len(seen) < 90:
                batches = await c.getmany(timeout_ms=1000)
                seen += [r.value for records in batches.values() for r in records]
        finally:
            await c.stop()
        return seen

    values = asyncio.run(aiokafka_round())
    assert sorted(values) == sorted([b"%s-%d" % (k, n) for k in (b"kp", b"ck", b"ak")
                                     for n in range(30)])
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "mp",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["shared"])
    got = []
    while len(got) < 90:
        message = consumer.poll(10)
        assert message is not None, f"only {len(got)} records"
        assert message.error() is None
        got.append(message.value())
    consumer.close()
    assert sorted(got) == sorted(values)


@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_kill_9_of_the_leader_loses_nothing_and_duplicates_nothing(cluster, client):
    topic = f"kill-{client}"
    create_replicated_topic(cluster.bootstrap, topic)
    wait_until(lambda: len(leader_of(cluster, topic, 0)["isr"]) == 3, "a full ISR")
    killed: list[int] = []

    def on_sent(i: int) -> None:
        if i == 40:  # mid-stream: the leader's process dies without a word
            leader = leader_of(cluster, topic, 0)["leader"]
            killed.append(leader)
            cluster.kill(leader)

    acked = PRODUCERS[client](cluster.bootstrap, topic, on_sent, 100, True)
    assert len(acked) == 100
    survivor = next(i for i in cluster.ids if i != killed[0])
    wait_until(lambda: leader_of(cluster, topic, survivor)["leader"] not in (-1, killed[0]),
               "a new leader")
    values = read_all(f"127.0.0.1:{cluster.ports[survivor]}", topic)
    assert values == acked  # every acknowledged record, once, in order

    cluster.start(killed[0])  # truncates, catches up, rejoins
    wait_until(lambda: killed[0] in leader_of(cluster, topic, survivor)["isr"],
               "the restarted broker back in the ISR")
    assert read_all(cluster.bootstrap, topic) == acked


async def test_a_new_controller_fences_the_old_epoch_over_tcp(cluster):
    first = next(b for b in cluster.brokers(0) if b["controller"])
    old_epoch = first["controller_epoch"]
    cluster.kill(first["id"])
    survivor = next(i for i in cluster.ids if i != first["id"])
    second = wait_until(
        lambda: next((b for b in cluster.brokers(survivor)
                      if b["controller"] and b["controller_epoch"] > old_epoch), None),
        "a new controller")
    assert second["controller_epoch"] == old_epoch + 1
    for b in cluster.ids:  # every surviving broker has heard the new epoch
        if b != first["id"]:
            wait_until(lambda b=b: any(x["controller"] and x["id"] == second["id"]
                                       for x in cluster.brokers(b)), f"broker {b}")
    # The dead controller's epoch, as a stale controller would still send it, over TCP.
    client = await RawClient.connect(cluster.ports[second["id"]])
    state = LeaderAndIsr("ghost", 0, first["id"], 9, [first["id"]], [first["id"]])
    response = await client.request(LEADER_AND_ISR, 7, leader_and_isr_body(
        first["id"], old_epoch, [state], {}))
    await client.close()
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH


def test_an_expired_session_drops_the_broker_then_it_rejoins(cluster):
    create_replicated_topic(cluster.bootstrap, "expiry")
    wait_until(lambda: len(leader_of(cluster, "expiry", 0)["isr"]) == 3, "a full ISR")
    paused = next(i for i in cluster.ids if not any(
        b["controller"] and b["id"] == i for b in cluster.brokers(0)))
    watcher = next(i for i in cluster.ids if i != paused)
    cluster.kill(paused, signal.SIGSTOP)  # silent past zookeeper.session.timeout.ms (3 s)
    try:
        wait_until(lambda: not cluster.registered(paused, via=watcher), "the broker dropped")
        wait_until(lambda: paused not in leader_of(cluster, "expiry", watcher)["isr"],
                   "the broker out of the ISR")
    finally:
        cluster.kill(paused, signal.SIGCONT)
    wait_until(lambda: cluster.registered(paused, via=watcher), "the broker registered again")
    wait_until(lambda: paused in leader_of(cluster, "expiry", watcher)["isr"],
               "the broker back in the ISR")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    producer.send("expiry", value=b"after").get(timeout=30)
    producer.close()
    assert read_all(f"127.0.0.1:{cluster.ports[paused]}", "expiry")[-1:] == [b"after"]


async def test_controlled_shutdown_moves_leadership_off_a_live_broker(cluster):
    create_replicated_topic(cluster.bootstrap, "drain")
    wait_until(lambda: len(leader_of(cluster, "drain", 0)["isr"]) == 3, "a full ISR")
    leaving = leader_of(cluster, "drain", 0)["leader"]
    controller = next(b["id"] for b in cluster.brokers(0) if b["controller"])
    client = await RawClient.connect(cluster.ports[controller])
    response = await client.request(CONTROLLED_SHUTDOWN, 3, {"broker_id": leaving,
                                                             "broker_epoch": -1})
    await client.close()
    assert (response.error_code, list(response.remaining_partitions)) == (ErrorCode.NONE, [])
    state = leader_of(cluster, "drain", leaving)
    assert state["leader"] != leaving and leaving not in state["isr"]
    assert cluster.registered(leaving)  # still up: it only handed its work over
    other = next(i for i in cluster.ids if i not in (leaving, controller))
    client = await RawClient.connect(cluster.ports[other])  # only the controller answers
    response = await client.request(CONTROLLED_SHUTDOWN, 3, {"broker_id": leaving,
                                                             "broker_epoch": -1})
    await client.close()
    assert response.error_code == ErrorCode.NOT_CONTROLLER


def test_sigterm_shuts_a_broker_down_in_a_controlled_way(cluster):
    create_replicated_topic(cluster.bootstrap, "sigterm")
    wait_until(lambda: len(leader_of(cluster, "sigterm", 0)["isr"]) == 3, "a full ISR")
    leader = leader_of(cluster, "sigterm", 0)["leader"]
    cluster.kill(leader, signal.SIGTERM)
    assert cluster.processes[leader].returncode == 0
    log = (cluster.root / f"broker-{leader}.log").read_text()
    assert "controlled shutdown succeeded" in log
    survivor = next(i for i in cluster.ids if i != leader)
    state = leader_of(cluster, "sigterm", survivor)
    assert state["leader"] not in (-1, leader) and leader not in state["isr"]


def test_followers_fetch_in_sessions_over_tcp(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic("sessions", num_partitions=6, replication_factor=3)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(12):
        producer.send("sessions", b"%d" % i, partition=i % 6)
    producer.flush()
    producer.close()

    def sessions(i: int) -> dict:
        return cluster.control(i, "/purgatory")["fetch_sessions"][str(i)]

    # Every broker leads two partitions; each other broker's fetcher holds one privileged
    # session with them there, and goes on incrementally (TcpLeaderEndpoint's session fields).
    for i in cluster.ids:
        wait_until(lambda i=i: (sessions(i)["privileged"], sessions(i)["partitions"]) == (2, 4)
                   and sessions(i)["fetches"]["incremental"] > 0, f"broker {i}'s sessions")
        assert sessions(i)["fetches"]["error"] == 0


def test_ctl_clock_drives_every_process_clock_and_a_session_expires_on_it(zk_connect, tmp_path):
    """ZooKeeper mode: each process has its own clock; `ctl clock --urls` drives all three, and a
    static member's session ends on its coordinator's clock exactly at session.timeout.ms."""
    from broker.control import ctl

    c = ProcessCluster(zk_connect, tmp_path, overrides={"group.initial.rebalance.delay.ms": "0"})
    c.start()
    try:
        c.wait_until_all_registered()
        urls = ",".join(f"http://127.0.0.1:{c.control_ports[i]}" for i in c.ids)
        assert ctl.main(["clock", "freeze", "--urls", urls]) == 0
        states = [c.control(i, "/clock") for i in c.ids]
        assert [(s["frozen"], s["brokers"]) for s in states] == [(True, [i]) for i in c.ids]
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)  # made first: see README's example
        admin.create_topics([NewTopic("clocked", num_partitions=1, replication_factor=3)])
        admin.close()
        consumer = KafkaConsumer("clocked", bootstrap_servers=c.bootstrap, group_id="billing",
                                 group_instance_id="worker-1", session_timeout_ms=10_000)
        while not consumer.assignment():
            consumer.poll(timeout_ms=50)
        consumer.close()  # a static member: no LeaveGroup

        def group() -> tuple[str, int]:
            for i in c.ids:  # only the coordinator's control API knows the group
                try:
                    (view,) = c.control(i, "/groups?group=billing")
                except urllib.error.HTTPError:
                    continue
                return view["state"], len(view["members"])
            raise AssertionError("no coordinator knows the group")

        assert group() == ("Stable", 1)
        assert ctl.main(["clock", "advance", "9999", "--urls", urls]) == 0
        assert group() == ("Stable", 1)
        assert ctl.main(["clock", "advance", "1", "--urls", urls]) == 0
        assert group() == ("Empty", 0)
        assert ctl.main(["clock", "resume", "--urls", urls]) == 0
        assert not any(c.control(i, "/clock")["frozen"] for i in c.ids)
    finally:
        c.stop()
