"""The virtual clock over the control API, with kafka-python over real TCP: a static member's
session, a transaction's timeout, retention and `ctl clock` all follow `clock advance`, with no
real waiting (each test asserts it took well under the timeouts it crossed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import ProducerFencedError
from kafka.structs import TopicPartition

from broker.control import ctl
from broker.control.control_client import ControlError
from broker.testing.embedded_cluster import EmbeddedCluster
from tests.integration.raw_client import RawClient
from tests.integration.test_fetch_sessions import fetch_body
from timer import ManualClock


@pytest.fixture
def cluster(tmp_path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path) as started:
        yield started


def eventually(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Poll the control API until `condition` (state another thread finishes writing)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.005)


def members(cluster: EmbeddedCluster, group: str) -> tuple[str, int]:
    (view,) = cluster.control.groups(group)
    return view["state"], len(view["members"])


def test_a_static_members_session_expires_on_advance_not_before(cluster):
    started = time.monotonic()
    cluster.clock.freeze()  # before the join: every heartbeat's deadline is now + session timeout
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)  # made first: see README's example
    admin.create_topics([NewTopic("orders", 1, 1)])
    admin.close()
    consumer = KafkaConsumer("orders", bootstrap_servers=cluster.bootstrap, group_id="billing",
                             group_instance_id="worker-1", session_timeout_ms=10_000)
    while not consumer.assignment():
        consumer.poll(timeout_ms=50)
    consumer.close()  # a static member sends no LeaveGroup: only its session can end it
    assert members(cluster, "billing") == ("Stable", 1)
    cluster.clock.advance(9_999)
    assert members(cluster, "billing") == ("Stable", 1)
    state = cluster.clock.advance(1)
    assert members(cluster, "billing") == ("Empty", 0)
    assert state["frozen"] and state["brokers"] == [0]
    assert time.monotonic() - started < 9.0  # 10 s of session timeout, crossed without waiting


def test_a_fetch_waits_its_max_wait_in_real_time_while_frozen(cluster):
    """A parked Fetch on a frozen clock ends after its max_wait_ms of real time, so the request
    queued behind it on the same connection (a consumer's JoinGroup, say) is answered."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic("idle", 1, 1)])
    admin.close()
    cluster.clock.freeze()
    port = int(cluster.bootstrap.rsplit(":", 1)[1])

    async def fetch_then_metadata() -> tuple[float, object]:
        client = await RawClient.connect(port)
        started = time.monotonic()
        fetched = asyncio.ensure_future(client.request(1, 12, fetch_body(
            0, -1, {0: 0}, topic="idle", max_wait_ms=300, min_bytes=1)))
        answer = await asyncio.wait_for(fetched, 20)
        waited = time.monotonic() - started
        metadata = await client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
        await client.close()
        assert [t.name for t in metadata.topics] == ["idle"]
        return waited, answer

    waited, answer = asyncio.run(fetch_then_metadata())
    assert waited >= 0.3  # it did wait its max_wait_ms...
    assert [len(p.records or b"") for t in answer.responses for p in t.partitions] == [0]
    assert cluster.clock.state()["frozen"]  # ...with the broker's clock standing still


def test_a_transaction_timeout_fires_on_advance_and_the_coordinator_aborts(cluster):
    started = time.monotonic()
    cluster.clock.freeze()  # before the transaction starts: it times out at exactly now + 60 s
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="billing-tx",
                             transaction_timeout_ms=60_000)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("invoices", b"half-written")
    producer.flush()
    (txn,) = cluster.control.transactions("billing-tx")
    assert txn["state"] == "Ongoing"
    # The abort job runs every transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s).
    cluster.clock.advance(59_999)
    assert cluster.control.transactions("billing-tx")[0]["state"] == "Ongoing"
    cluster.clock.advance(10_001)
    eventually(lambda: cluster.control.transactions("billing-tx")[0]["state"] == "CompleteAbort")
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction()
    producer.close()
    assert time.monotonic() - started < 30.0  # 70 s of broker time


def test_retention_follows_the_clock(tmp_path):
    with EmbeddedCluster(tmp_path, properties={"log.retention.check.interval.ms": 1000}) as cluster:
        retention_after_advances(cluster)


def retention_after_advances(cluster: EmbeddedCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic("events", 1, 1, topic_configs={"retention.ms": "60000"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    for value in (b"old", b"older"):
        producer.send("events", value).get(10)
    producer.close()
    cluster.clock.freeze()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    partition = TopicPartition("events", 0)
    # Each advance crosses a retention check (every second here); the records are only as old
    # as the broker's wall time says: 58 s (plus the real moment before the freeze) is kept...
    cluster.clock.advance(58_000)
    assert consumer.beginning_offsets([partition])[partition] == 0
    # ...past retention.ms their segment goes (the active one is rolled first, as Kafka does).
    cluster.clock.advance(3_000)
    eventually(lambda: consumer.beginning_offsets([partition])[partition] == 2)
    consumer.close()


def test_ctl_clock_shows_freezes_advances_and_resumes(cluster, monkeypatch, capsys):
    monkeypatch.setenv("KAFKA_SIM_CONTROL_URL", cluster.control.url)
    assert ctl.main(["clock"]) == 0
    assert capsys.readouterr().out.startswith("running  broker time ")
    assert ctl.main(["clock", "freeze"]) == 0
    frozen = capsys.readouterr().out
    assert frozen.startswith("frozen  ") and frozen.rstrip().endswith("brokers 0")
    before = cluster.clock.state()
    assert ctl.main(["clock", "advance", "45000"]) == 0
    assert f"broker time {before['now_ms'] + 45_000} ms" in capsys.readouterr().out
    # --urls: the same command to several control APIs (one per broker process), one line each.
    url = cluster.control.url
    assert ctl.main(["clock", "advance", "5", "--urls", f"{url},{url}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  broker time ")[0] for line in lines] == [f"{url}  frozen"] * 2
    assert f"broker time {before['now_ms'] + 45_010} ms" in lines[1]
    assert ctl.main(["clock", "resume"]) == 0
    assert capsys.readouterr().out.startswith("running  ")
    after = cluster.clock.state()
    assert after["now_ms"] >= before["now_ms"] + 45_010 and not after["frozen"]


@pytest.mark.parametrize("ms", [-5, "5", 1.5, True, None, 2**63])
def test_advance_refuses_what_is_not_a_sane_amount(cluster, ms):
    before = cluster.clock.state()["offset_ms"]
    with pytest.raises(ControlError) as refused:
        cluster.control._call("POST", "/clock/advance", body={"ms": ms})
    assert refused.value.status == 400
    assert cluster.clock.state()["offset_ms"] <= before  # time did not move


async def test_a_cluster_on_a_manual_clock_refuses_the_virtual_clock_controls(tmp_path):
    from broker.server.cluster import Cluster
    from tests.harness import cluster_config

    cluster = Cluster(cluster_config(tmp_path), 1, clock=ManualClock())
    with pytest.raises(ValueError, match="ManualClock"):
        cluster.freeze_clock()
