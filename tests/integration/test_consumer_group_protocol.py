"""KIP-848 consumer groups over a real listener: ConsumerGroupHeartbeat reconciles members to the
server-side assignor's target (revoke before assign), fences stale epochs, expires silent members
on the timing wheel; OffsetCommit checks member epochs; ConsumerGroupDescribe shows it all; and
confluent-kafka's `group.protocol=consumer` consumers share a topic through it."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from tests.harness import cluster_config
from tests.integration.console_tools import Tools
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import create_topic
from timer import ManualClock

HEARTBEAT, DESCRIBE, JOIN_GROUP, METADATA, FIND_COORDINATOR, API_VERSIONS = 68, 69, 11, 3, 10, 18
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 8, 9, 15, 16, 42


class Member:
    """One member's side of the protocol, over its own connection."""

    def __init__(self, client: RawClient, group: str, member_id: str, topic_ids: dict) -> None:
        self.client, self.group, self.member_id = client, group, member_id
        self.topic_ids = topic_ids
        self.names = {v: k for k, v in topic_ids.items()}
        self.epoch = 0

    async def beat(self, *, epoch: int | None = None, topics: list[str] | None = None,
                   owned: dict[str, list[int]] | None = None, assignor: str | None = None,
                   version: int = 1, member_id: str | None = None,
                   instance_id: str | None = None):
        body = {"group_id": self.group,
                "member_id": self.member_id if member_id is None else member_id,
                "member_epoch": self.epoch if epoch is None else epoch,
                "instance_id": instance_id,
                "rack_id": None, "rebalance_timeout_ms": 300_000 if topics else -1,
                "subscribed_topic_names": topics, "subscribed_topic_regex": None,
                "server_assignor": assignor,
                "topic_partitions": None if owned is None else [
                    {"topic_id": self.topic_ids[t], "partitions": ps} for t, ps in owned.items()]}
        answer = await self.client.request(HEARTBEAT, version, body)
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
        return answer

    def assignment(self, answer) -> dict[str, list[int]] | None:
        if answer.assignment is None:
            return None
        return {self.names[bytes(tp.topic_id)]: sorted(tp.partitions)
                for tp in answer.assignment.topic_partitions}

    async def join(self, topics: list[str], **kw):
        return await self.beat(epoch=0, topics=topics, owned={}, **kw)


async def topic_ids(client: RawClient, *names: str) -> dict[str, bytes]:
    answer = await client.request(METADATA, 12, {
        "topics": [{"name": n, "topic_id": b"\0" * 16} for n in names],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return {t.name: bytes(t.topic_id) for t in answer.topics}


async def members(port: int, group: str, topic: str, count: int, partitions: int) -> list[Member]:
    admin = await RawClient.connect(port)
    await create_topic(admin, topic, partitions)
    ids = await topic_ids(admin, topic)
    for _ in range(500):  # the first FindCoordinator makes __consumer_offsets; then it loads
        found = await admin.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if found.error_code == 0 and (await describe(admin, group)).error_code not in (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR):
            break
        await asyncio.sleep(0.01)
    await admin.close()
    return [Member(await RawClient.connect(port), group, f"member-{i}", ids) for i in range(count)]


async def describe(client: RawClient, group: str):
    answer = await client.request(DESCRIBE, 0, {"group_ids": [group],
                                                "include_authorized_operations": False})
    return answer.groups[0]


async def test_a_member_revokes_before_another_is_given_its_partitions(async_broker):
    a, b = await members(async_broker.port, "g", "cg", 2, 4)
    joined = await a.join(["cg"])
    assert (joined.error_code, joined.member_epoch, a.assignment(joined)) == (
        0, 1, {"cg": [0, 1, 2, 3]})
    # b joins: the target splits the topic, but a still owns b's half, so b gets nothing yet.
    joined = await b.join(["cg"])
    assert (joined.member_epoch, b.assignment(joined)) == (2, {})
    # a is told to keep half (its epoch stays 1 until it has revoked the rest)...
    told = await a.beat(owned={"cg": [0, 1, 2, 3]})
    assert (told.member_epoch, a.assignment(told)) == (1, {"cg": [0, 1]})
    # ...until it says it owns only that half: then it moves to epoch 2.
    told = await a.beat(owned={"cg": [0, 1]})
    assert (told.member_epoch, a.assignment(told)) == (2, {"cg": [0, 1]})
    released = await b.beat()
    assert (released.member_epoch, b.assignment(released)) == (2, {"cg": [2, 3]})
    group = await describe(a.client, "g")
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch,
            group.assignor_name) == (0, "Stable", 2, 2, "uniform")
    assert {m.member_id: sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
            for m in group.members} == {"member-0": [0, 1], "member-1": [2, 3]}
    # b leaves: a is given everything once it heartbeats.
    left = await b.beat(epoch=-1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    told = await a.beat()
    assert (told.member_epoch, a.assignment(told)) == (3, {"cg": [0, 1, 2, 3]})
    for m in (a, b):
        await m.client.close()


async def test_range_assignor_and_errors_as_kafka_answers_them(async_broker):
    a, b = await members(async_broker.port, "h", "rg", 2, 3)
    assert (await a.join(["rg"], assignor="sticky")).error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    joined = await a.join(["rg"], assignor="range")
    assert a.assignment(joined) == {"rg": [0, 1, 2]}
    assert (await b.join([], member_id="x")).error_code == ErrorCode.INVALID_REQUEST  # no topics
    assert (await b.join(["rg"], member_id="")).error_code == ErrorCode.INVALID_REQUEST  # v1: no id
    assert (await b.beat(epoch=5)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await a.beat(epoch=a.epoch + 1)).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    v0 = await b.join(["rg"], member_id="", version=0)  # v0: the coordinator names the member
    assert v0.error_code == 0 and uuid.UUID(v0.member_id)
    # OffsetCommit: the member's epoch, not a generation.
    commit = {"group_id": "h", "generation_id_or_member_epoch": a.epoch, "member_id": "member-0",
              "group_instance_id": None, "topics": [{"name": "rg", "partitions": [
                  {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                   "committed_metadata": None}]}]}
    answer = await a.client.request(OFFSET_COMMIT, 9, commit)
    assert answer.topics[0].partitions[0].error_code == 0
    stale = {**commit, "generation_id_or_member_epoch": 0}
    answer = await a.client.request(OFFSET_COMMIT, 9, stale)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    answer = await a.client.request(OFFSET_COMMIT, 9, {**commit, "member_id": "nobody"})
    assert answer.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # A classic member joins a consumer group only with a subscription it can read.
    classic = await a.client.request(JOIN_GROUP, 5, {
        "group_id": "h", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]})
    assert classic.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    fetch = {"groups": [{"group_id": "h", "member_id": "member-0", "member_epoch": 0,
                         "topics": None}], "require_stable": False}
    answer = await a.client.request(OFFSET_FETCH, 9, fetch)
    assert answer.groups[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    fetch["groups"][0]["member_epoch"] = a.epoch
    answer = await a.client.request(OFFSET_FETCH, 9, fetch)
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
            for t in answer.groups[0].topics] == [("rg", [(0, 0)])]
    listed = await a.client.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
        ("h", "consumer", "consumer")]
    classic_view = await a.client.request(DESCRIBE_GROUPS, 5, {
        "groups": ["h"], "include_authorized_operations": False})
    assert (classic_view.groups[0].error_code, classic_view.groups[0].group_state) == (0, "Dead")
    missing = await describe(a.client, "nope")
    assert (missing.error_code, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group nope not found.")
    for m in (a, b):
        await m.client.close()


@contextlib.asynccontextmanager
async def manual_clock_broker(tmp_path, clock: ManualClock):
    cluster = Cluster(cluster_config(tmp_path, {"group.consumer.session.timeout.ms": "10000"}),
                      1, clock=clock)
    await cluster.start()
    broker = cluster.brokers[0]
    await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
    try:
        yield broker
    finally:
        await cluster.stop()


async def expiries_run() -> None:
    for _ in range(50):  # the reaper's expiry runs on the loop
        await asyncio.sleep(0)


async def test_a_silent_member_is_removed_at_its_session_timeout(tmp_path):
    """group.consumer.session.timeout.ms on the manual clock: the silent member goes, the other
    is given its partitions."""
    clock = ManualClock(1_000)
    async with manual_clock_broker(tmp_path, clock) as broker:
        a, b = await members(broker.port, "s", "st", 2, 2)
        await a.join(["st"])
        await b.join(["st"])
        await a.beat(owned={"st": [0, 1]})
        await a.beat(owned={"st": [0]})
        clock.advance(6_000)
        await a.beat(owned={"st": [0]})  # a stays alive; b says nothing from here on
        clock.advance(6_000)
        await expiries_run()
        group = await describe(a.client, "s")
        assert [m.member_id for m in group.members] == ["member-0"]
        told = await a.beat()
        assert a.assignment(told) == {"st": [0, 1]}
        for m in (a, b):
            await m.client.close()


async def test_a_static_member_restarts_without_a_rebalance(tmp_path):
    """A static member (instance id) leaving with epoch -2 keeps its partitions; one joining with
    its instance id takes them over at once, with no new group epoch; a second one meanwhile is
    UNRELEASED_INSTANCE_ID; gone past its session timeout, it is removed."""
    clock = ManualClock(1_000)
    async with manual_clock_broker(tmp_path, clock) as broker:
        a, b, b2, b3 = await members(broker.port, "st", "sm", 4, 2)
        await a.join(["sm"], instance_id="ia")
        await b.join(["sm"], instance_id="ib")
        await a.beat(owned={"sm": [0, 1]})
        await a.beat(owned={"sm": [0]})
        assert b.assignment(await b.beat()) == {"sm": [1]}
        refused = await b2.join(["sm"], instance_id="ib")
        assert refused.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
        epoch = b.epoch
        left = await b.beat(epoch=-2)
        assert (left.error_code, left.member_epoch) == (0, -2)
        taken = await b2.join(["sm"], instance_id="ib")
        assert (taken.member_epoch, b2.assignment(taken)) == (epoch, {"sm": [1]})
        group = await describe(a.client, "st")
        assert (group.group_epoch, sorted(m.member_id for m in group.members)) == (
            2, ["member-0", "member-2"])
        assert (await b2.beat(epoch=-2)).member_epoch == -2  # away again, and for good
        clock.advance(6_000)
        await a.beat(owned={"sm": [0]})
        clock.advance(6_000)
        await expiries_run()
        assert a.assignment(await a.beat()) == {"sm": [0, 1]}
        assert (await b3.join(["sm"], instance_id="ib")).error_code == 0  # a fresh member
        for m in (a, b, b2, b3):
            await m.client.close()


async def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(tmp_path):
    clock = ManualClock(1_000)
    async with manual_clock_broker(tmp_path, clock) as broker:
        a, b = await members(broker.port, "r", "rv", 2, 2)
        await a.join(["rv"])  # rebalance timeout 300 s
        await b.join(["rv"])
        told = await a.beat(owned={"rv": [0, 1]})  # told to revoke one; it never does
        assert a.assignment(told) == {"rv": [0]}
        for _ in range(60):  # both keep their sessions alive for 300 s
            clock.advance(5_000)
            await a.beat(owned={"rv": [0, 1]})
            await b.beat()
        await expiries_run()
        await b.beat()
        group = await describe(b.client, "r")
        assert [(m.member_id, [sorted(tp.partitions) for tp in m.assignment.topic_partitions])
                for m in group.members] == [("member-1", [[0, 1]])]
        assert (await a.beat()).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        for m in (a, b):
            await m.client.close()


def topic_with_records(bootstrap: str, topic: str, partitions: int, replicas: int,
                       count: int) -> Producer:
    """A new topic holding records "0".."count-1", spread over its partitions in turn."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, b"%d" % i, partition=i % partitions)
    assert producer.flush(10) == 0
    return producer


@pytest.mark.broker_config({"group.consumer.heartbeat.interval.ms": "300"})
def test_confluent_kafka_consumers_share_a_topic_with_group_protocol_consumer(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic_with_records(bootstrap, "kip848", 4, 1, 40)

    def consumer(name: str) -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848-app",
                      "group.protocol": "consumer", "client.id": name,
                      "auto.offset.reset": "earliest"})
        c.subscribe(["kip848"])
        return c

    def poll_until(done, consumers: list[Consumer], seen: set[bytes]) -> None:
        deadline = time.monotonic() + 30
        while not done():
            assert time.monotonic() < deadline, [c.assignment() for c in consumers]
            for c in consumers:
                message = c.poll(0.05)
                if message is not None:
                    assert message.error() is None, message.error()
                    seen.add(message.value())

    def partitions(c: Consumer) -> set[int]:
        return {tp.partition for tp in c.assignment()}

    seen: set[bytes] = set()
    first = consumer("first")
    poll_until(lambda: partitions(first) == {0, 1, 2, 3}, [first], seen)
    second = consumer("second")
    poll_until(lambda: len(partitions(first)) == len(partitions(second)) == 2
               and not partitions(first) & partitions(second), [first, second], seen)
    poll_until(lambda: len(seen) == 40, [first, second], seen)
    # kafka-sim groups shows the group's members and what each was given
    described = Tools(bootstrap).ok("groups", "--describe", "--group", "kip848-app", "--members")
    rows = [line.split() for line in described.strip().splitlines()[1:]]
    assert sorted((r[3], r[4]) for r in rows) == [("first", "2"), ("second", "2")], described
    (view,) = kafka_broker.call(lambda: kafka_broker.cluster.groups("kip848-app"))  # ctl, console
    assert (view["type"], view["state"], view["protocol"]) == ("consumer", "Stable", "uniform")
    assert sorted(sum(len(ps) for ps in m["assignment"].values()) for m in view["members"]) == [2, 2]
    state = Tools(bootstrap).ok("groups", "--describe", "--group", "kip848-app", "--state")
    assert state.strip().splitlines()[-1].split()[-3:] == ["uniform", "Stable", "2"], state
    first.close()
    poll_until(lambda: partitions(second) == {0, 1, 2, 3}, [second], seen)
    second.close()
    assert seen == {b"%d" % i for i in range(40)}


def test_consumers_go_on_when_their_coordinator_stops(broker_factory):
    """When the coordinator's broker stops, the member finds the next coordinator, which has
    loaded the group from __consumer_offsets, and goes on reading: nothing twice."""
    cluster = broker_factory({"group.consumer.heartbeat.interval.ms": "300",
                              "offsets.topic.replication.factor": "3"}, brokers=3)
    bootstrap = cluster.bootstrap
    producer = topic_with_records(bootstrap, "moving", 2, 3, 20)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848-moving",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["moving"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 20:
        assert time.monotonic() < deadline, len(seen)
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.commit(asynchronous=False)
    coordinator = cluster.call(lambda: next(
        b.broker_id for b in cluster.cluster.brokers.values()
        if b.running and b.group_coordinator.consumer_groups))
    cluster.call(lambda: cluster.cluster.stop_broker(coordinator))
    for i in range(20, 30):
        producer.produce("moving", b"%d" % i, partition=i % 2)
    assert producer.flush(10) == 0

    def rejoined() -> bool:  # the member is in the group at the new coordinator
        return cluster.call(lambda: any(
            (group := b.group_coordinator.consumer_group("kip848-moving")) is not None
            and group.members for b in cluster.cluster.brokers.values() if b.running))

    deadline = time.monotonic() + 60
    while len(seen) < 30 or not rejoined():
        assert time.monotonic() < deadline, len(seen)
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.close()
    assert sorted(seen, key=int) == [b"%d" % i for i in range(30)]  # nothing read twice


@pytest.mark.broker_config({"group.consumer.heartbeat.interval.ms": "300"})
def test_a_regex_subscription_follows_the_topics_it_matches(kafka_broker):
    """confluent-kafka's `^pattern` subscription goes to the coordinator as a regex (v1): the
    topics it matches are assigned, and a matching topic created later joins the assignment."""
    bootstrap = kafka_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name in ("rx-a", "rx-b", "other"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848-regex",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    consumer.subscribe(["^rx-.*"])

    def assigned_topics(wanted: set[str]) -> None:
        deadline = time.monotonic() + 30
        while {tp.topic for tp in consumer.assignment()} != wanted:
            assert time.monotonic() < deadline, consumer.assignment()
            consumer.poll(0.1)

    assigned_topics({"rx-a", "rx-b"})
    admin.create_topics([NewTopic("rx-c", 1, 1)])["rx-c"].result(10)
    assigned_topics({"rx-a", "rx-b", "rx-c"})
    consumer.close()


async def test_a_regex_that_does_not_compile_is_refused(async_broker):
    (a,) = await members(async_broker.port, "re", "rt", 1, 1)
    answer = await a.client.request(HEARTBEAT, 1, {
        "group_id": "re", "member_id": "m", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 300_000, "subscribed_topic_names": [],
        "subscribed_topic_regex": "rt(", "server_assignor": None, "topic_partitions": []})
    assert answer.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    await a.client.close()


async def test_a_new_coordinator_reloads_the_group_from_its_records(tmp_path):
    """The group's records (Kafka 4's ConsumerGroupMetadata, member metadata, target and current
    assignments) are in __consumer_offsets: when its coordinator stops, the next one loads them,
    and the members go on with their epochs and partitions, without joining again."""
    cluster = Cluster(cluster_config(tmp_path, {"offsets.topic.replication.factor": "3"}), 3)
    await cluster.start()
    try:
        for b in cluster.brokers.values():
            await b.metadata_cache.wait_for(lambda s: len(s.brokers) == 3, 30_000)
        port = next(iter(cluster.brokers.values())).port
        admin = await RawClient.connect(port)
        await admin.request(19, 7, {"topics": [{"name": "fo", "num_partitions": 2,
                                                "replication_factor": 3}]})
        ids = await topic_ids(admin, "fo")

        async def coordinator_port() -> int:
            for _ in range(1000):
                found = await admin.request(FIND_COORDINATOR, 3, {"key": "fo-g", "key_type": 0})
                if found.error_code == 0:
                    return found.port
                await asyncio.sleep(0.01)
            raise AssertionError("no coordinator")

        port = await coordinator_port()
        a, b = [Member(await RawClient.connect(port), "fo-g", f"m{i}", ids) for i in range(2)]
        for _ in range(500):  # the coordinator may still be loading its partition
            if (await a.join(["fo"], instance_id="static-a")).error_code == 0:
                break
            await asyncio.sleep(0.01)
        await b.join(["fo"])
        await a.beat(owned={"fo": [0, 1]})
        await a.beat(owned={"fo": [0]})
        await b.beat()
        assert (a.epoch, b.epoch) == (2, 2)
        coordinator = next(x for x in cluster.brokers.values() if x.port == port)
        await cluster.stop_broker(coordinator.broker_id)
        new_port = await coordinator_port()
        assert new_port != port
        for m in (a, b):
            await m.client.close()
            m.client = await RawClient.connect(new_port)
        for _ in range(500):  # the new coordinator loads the partition first
            kept = await a.beat(owned={"fo": [0]})
            if kept.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            await asyncio.sleep(0.01)
        assert (kept.error_code, kept.member_epoch) == (0, 2)
        group = await describe(b.client, "fo-g")
        assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Stable", 2, 2)
        assert {m.member_id: ([sorted(tp.partitions) for tp in m.assignment.topic_partitions],
                              m.instance_id) for m in group.members} == {
            "m0": ([[0]], "static-a"), "m1": ([[1]], None)}
        for m in (a, b):
            await m.client.close()
        await admin.close()
    finally:
        await cluster.stop()


async def test_an_empty_consumer_group_can_be_deleted(async_broker):
    (a,) = await members(async_broker.port, "del-g", "dt", 1, 1)
    await a.join(["dt"])

    async def delete() -> int:
        answer = await a.client.request(DELETE_GROUPS, 2, {"groups_names": ["del-g"]})
        return answer.results[0].error_code

    assert await delete() == ErrorCode.NON_EMPTY_GROUP
    # Its offsets of a topic a member subscribes to do not expire while it has members.
    commit = await a.client.request(OFFSET_COMMIT, 9, {
        "group_id": "del-g", "generation_id_or_member_epoch": a.epoch, "member_id": "member-0",
        "group_instance_id": None, "topics": [{"name": "dt", "partitions": [
            {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})
    assert commit.topics[0].partitions[0].error_code == 0
    coordinator = async_broker.group_coordinator
    a_year_later = coordinator.time_ms() + 365 * 86_400_000
    assert await coordinator.cleanup_expired_offsets(a_year_later) == 0
    await a.beat(epoch=-1)
    assert await coordinator.cleanup_expired_offsets(a_year_later) == 1  # nobody reads them now
    assert await delete() == ErrorCode.NONE
    assert (await describe(a.client, "del-g")).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    listed = await a.client.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [g.group_id for g in listed.groups] == []
    await a.client.close()


async def test_api_versions_reports_the_finalized_group_version(async_broker):
    client = await RawClient.connect(async_broker.port)
    answer = await client.request(API_VERSIONS, 3, {"client_software_name": "t",
                                                    "client_software_version": "1"})
    assert [(f.name, f.min_version, f.max_version) for f in answer.supported_features] == [
        ("group.version", 0, 1), ("metadata.version", 1, 25), ("share.version", 0, 1),
        ("transaction.version", 0, 2)]
    assert [(f.name, f.max_version_level) for f in answer.finalized_features] == [
        ("group.version", 1), ("metadata.version", 25), ("share.version", 1),
        ("transaction.version", 2)]
    assert {k.api_key: k.max_version for k in answer.api_keys}[HEARTBEAT] == 1
    await client.close()


@pytest.mark.broker_config({"feature.levels": "group.version=0,share.version=0,"
                                             "transaction.version=0,metadata.version=0"})
async def test_group_version_0_answers_as_a_zookeeper_mode_kafka_3_9(async_broker):
    """Pinned to group.version=0 (and the other features at 0) the broker is the ZK-mode 3.9 one:
    ConsumerGroupHeartbeat is advertised at v0 only, and it and ConsumerGroupDescribe answer
    UNSUPPORTED_VERSION."""
    client = await RawClient.connect(async_broker.port)
    answer = await client.request(API_VERSIONS, 3, {"client_software_name": "t",
                                                    "client_software_version": "1"})
    assert list(answer.finalized_features) == []
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}[HEARTBEAT] == (0, 0)
    beat = await client.request(HEARTBEAT, 0, {
        "group_id": "g", "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 300000, "subscribed_topic_names": ["t"], "server_assignor": None,
        "topic_partitions": []})
    assert (beat.error_code, beat.error_message) == (ErrorCode.UNSUPPORTED_VERSION, None)
    described = await client.request(DESCRIBE, 0, {
        "group_ids": ["g", "h"], "include_authorized_operations": False})
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("g", ErrorCode.UNSUPPORTED_VERSION), ("h", ErrorCode.UNSUPPORTED_VERSION)]
    await client.close()


async def test_a_hostile_regex_costs_time_linear_in_the_topic_names(async_broker):
    """(a+)+$ against a topic named a...ab backtracks for hours in Python's `re`; RE2, as Kafka's
    RE2/J, answers at once."""
    (a,) = await members(async_broker.port, "redos", "a" * 60 + "b", 1, 1)
    answer = await asyncio.wait_for(a.client.request(HEARTBEAT, 1, {
        "group_id": "redos", "member_id": "m", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 300_000, "subscribed_topic_names": [],
        "subscribed_topic_regex": "(a+)+", "server_assignor": None, "topic_partitions": []}), 10)
    assert (answer.error_code, answer.assignment.topic_partitions) == (0, [])  # no full match
    await a.client.close()


@pytest.mark.broker_config({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                            "allow.everyone.if.no.acl.found": "true"})
async def test_a_regex_matches_only_topics_the_member_may_describe(async_broker):
    """With an authorizer, the topics a member's regex matches are those its principal may
    DESCRIBE (Kafka's KAFKA-18813): a topic hidden from it by an ACL is never assigned."""
    from tests.integration.test_acl_checks import DENY, DESCRIBE, LITERAL, TOPIC, create_acls

    (a,) = await members(async_broker.port, "rx-acl", "rx-open", 1, 1)
    await create_topic(a.client, "rx-hidden", 1)
    await create_acls(a.client, (TOPIC, "rx-hidden", LITERAL, DESCRIBE, DENY))
    a.topic_ids.update(await topic_ids(a.client, "rx-hidden"))
    a.names = {v: k for k, v in a.topic_ids.items()}
    answer = await a.client.request(HEARTBEAT, 1, {
        "group_id": "rx-acl", "member_id": "m", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 300_000, "subscribed_topic_names": [],
        "subscribed_topic_regex": "rx-.*", "server_assignor": None, "topic_partitions": []})
    assert answer.error_code == 0
    assert a.assignment(answer) == {"rx-open": [0]}
    await a.client.close()
