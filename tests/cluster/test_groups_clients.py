"""Consumer groups with kafka-python, confluent-kafka and aiokafka against a 3-broker cluster:
two members share a 4-partition topic; one leaves and the other takes all; one is killed
(SIGKILL, no LeaveGroup) and its partitions come back after session.timeout.ms; commits survive
a close (a new member resumes exactly there); and the broker coordinating the group is stopped —
the group finds the new coordinator, which has its committed offsets."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from broker.control.control_client import ControlClient
from broker.control.ctl import main as ctl_main
from tests.cluster.group_clients import CONSUMERS, SESSION_MS

ALL = {0, 1, 2, 3}
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
             "group.min.session.timeout.ms": "1000"}
ROOT = Path(__file__).resolve().parents[2]


def produce(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20,
                             retry_backoff_ms=100, request_timeout_ms=5000)
    for p in sorted(ALL):
        for _ in range(per_partition):
            producer.send(topic, value=b"v", partition=p)
    producer.flush(60)
    producer.close()


def poll_until(consumers, condition, timeout_s: float = 30.0, received=None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for consumer in consumers:
            records = consumer.poll(0.1)
            if received is not None:
                received.extend(records)
        if condition():
            return
    raise AssertionError("condition not met in time")


def retry(action, timeout_s: float = 30.0) -> None:
    """confluent-kafka and aiokafka raise on a commit that meets a moving coordinator."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return action()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def committed(control: ControlClient, group: str) -> tuple[int, dict[int, int]]:
    [view] = control.groups(group)
    return view["coordinator"], {o["partition"]: o["committed_offset"] for o in view["offsets"]}


@pytest.mark.slow
@pytest.mark.parametrize("client", sorted(CONSUMERS))
def test_consumer_group_lifecycle(broker_factory, client, capsys):
    cluster = broker_factory(OVERRIDES, brokers=3, control=True)
    control = ControlClient(cluster.control.url)
    topic, group = f"orders-{client}", f"group-{client}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic(topic, 4, 3)])
    admin.close()
    produce(cluster.bootstrap, topic, 10)

    def make(name: str):
        return CONSUMERS[client](cluster.bootstrap, group, topic, name)

    # Two members share the partitions: each gets some, together all.
    c1 = make("c1")
    poll_until([c1], lambda: c1.assignment() == ALL)
    c2 = make("c2")
    poll_until([c1, c2], lambda: bool(c1.assignment()) and bool(c2.assignment())
               and not c1.assignment() & c2.assignment() and c1.assignment() | c2.assignment() == ALL)
    [view] = control.groups(group)
    assert view["state"] == "Stable" and len(view["members"]) == 2
    assert {p for m in view["members"] for p in m["assignment"][topic]} == ALL
    assert ctl_main(["--url", cluster.control.url, "groups", group]) == 0
    shown = capsys.readouterr().out
    assert f"group {group}" in shown and "state Stable" in shown and f"{topic}:" in shown

    # One leaves: the other gets everything.
    c2.close()
    poll_until([c1], lambda: c1.assignment() == ALL)

    # One is killed without leaving: its partitions return after its session times out.
    victim = subprocess.Popen(
        [sys.executable, "-m", "tests.cluster.group_clients", client, cluster.bootstrap, group, topic],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        poll_until([c1], lambda: 0 < len(c1.assignment()) < 4)
    finally:
        victim.kill()
        victim.wait()
    killed_at = time.monotonic()
    poll_until([c1], lambda: c1.assignment() == ALL)
    assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.5

    # Commit, close; a new member resumes from the committed offsets, re-reading nothing.
    poll_until([c1], lambda: c1.positions() == dict.fromkeys(ALL, 10))
    c1.commit()
    c1.close()
    assert committed(control, group)[1] == dict.fromkeys(ALL, 10)
    produce(cluster.bootstrap, topic, 2)
    [view] = control.groups(group)
    assert [o["lag"] for o in view["offsets"]] == [2, 2, 2, 2]
    c3 = make("c3")
    received: list = []
    poll_until([c3], lambda: len(received) >= 8, received=received)
    assert sorted((p, o) for p, o, _ in received) == sorted((p, o) for p in ALL for o in (10, 11))
    retry(c3.commit)

    # The coordinator's broker stops: the group finds the new one, which has the offsets.
    old_coordinator, offsets = committed(control, group)
    assert offsets == dict.fromkeys(ALL, 12)
    control.stop_broker(old_coordinator)
    produce(cluster.bootstrap, topic, 1)
    received.clear()
    poll_until([c3], lambda: len(received) >= 4, timeout_s=60, received=received)
    assert sorted((p, o) for p, o, _ in received) == [(p, 12) for p in sorted(ALL)]
    new_coordinator, offsets = committed(control, group)
    assert new_coordinator != old_coordinator and offsets == dict.fromkeys(ALL, 12)
    retry(c3.commit)
    assert committed(control, group)[1] == dict.fromkeys(ALL, 13)
    c3.close()
    [view] = control.groups(group)
    assert (view["state"], view["members"]) == ("Empty", [])  # c3 left the group on close


@pytest.mark.slow
def test_committed_offsets_survive_a_broker_restart(broker_factory):
    cluster = broker_factory(OVERRIDES)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic("kept", 1, 1)])
    admin.close()
    tp = TopicPartition("kept", 0)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="keeper",
                             enable_auto_commit=False)
    consumer.commit({tp: OffsetAndMetadata(5, "five", -1)})
    consumer.close()
    cluster.restart()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="keeper",
                             enable_auto_commit=False)
    assert consumer.committed(tp) == 5
    consumer.close()
