"""KIP-932 share groups over a real listener. confluent-kafka's ShareConsumer joins a share group
(ShareGroupHeartbeat), acquires records (ShareFetch) under acquisition locks on the timing
wheel, and acknowledges them: two consumers share one partition, a record whose lock expires is
delivered again with a higher delivery count, rejected records are archived. The protocol's
refusals are checked with raw requests."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.harness import until
from tests.integration.console_tools import Tools
from tests.integration.raw_client import RawClient
from tests.integration.test_consumer_group_protocol import topic_ids
from tests.integration.test_protocol_edges import create_topic, produce_body

PRODUCE, FIND_COORDINATOR, API_VERSIONS = 0, 10, 18
SHARE_HEARTBEAT, SHARE_DESCRIBE, SHARE_FETCH, SHARE_ACK = 76, 77, 78, 79
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS, DELETE_GROUPS = 90, 91, 92, 42
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


# -- with confluent-kafka's ShareConsumer ---------------------------------------------------------

def topic_of_single_batches(bootstrap: str, topic: str, count: int) -> Producer:
    """A one-partition topic holding records "0".."count-1", each in a batch of its own (so a
    consumer asking for a few records gets a few)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, b"%d" % i)
        assert producer.flush(10) == 0
    return producer


def read_from_earliest(bootstrap: str, group: str) -> None:
    """The group's share.auto.offset.reset (a group config, Kafka 4), set before it reads."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)


def share_consumer(bootstrap: str, group: str, topic: str, **config) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit", **config})
    consumer.subscribe([topic])
    return consumer


def poll_some(consumer: ShareConsumer, timeout_s: float = 30) -> list:
    """Poll until the consumer is given records (the first polls join the group)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        messages = list(consumer.poll(0.2))
        for m in messages:
            assert m.error() is None, m.error()
        if messages:
            return messages
    raise AssertionError("no records within the time")


def consume(consumer: ShareConsumer, count: int, verdict=lambda m: ACCEPT,
            timeout_s: float = 30) -> list:
    """Poll until `count` records were handed out, acknowledging each as `verdict` says and
    committing after each poll; the messages, in the order given."""
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, [(m.value(), m.delivery_count()) for m in got]
        for m in consumer.poll(0.2):
            got.append(m)
            consumer.acknowledge(m, verdict(m))
        consumer.commit_sync()
    return got


def test_two_share_consumers_on_one_partition_share_its_records(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic_of_single_batches(bootstrap, "queue", 20)
    read_from_earliest(bootstrap, "workers")
    first = share_consumer(bootstrap, "workers", "queue", **{"max.poll.records": 3})
    second = share_consumer(bootstrap, "workers", "queue", **{"max.poll.records": 3})
    # The first holds its records (acquired, not acknowledged): the second is given others.
    held = poll_some(first)
    given = poll_some(second)
    assert {m.offset() for m in held}.isdisjoint({m.offset() for m in given})
    # ctl and the console: the group, and at the partition's leader the records each holds
    (view,) = kafka_broker.call(lambda: kafka_broker.cluster.groups("workers"))
    assert (view["type"], view["state"], view["protocol"]) == ("share", "Stable", "simple")
    assert [m["assignment"] for m in view["members"]] == [{"queue": [0]}] * 2
    (partition,) = view["share_partitions"]
    holders = {r["member_id"]: r["last_offset"] - r["first_offset"] + 1
               for r in partition["in_flight"] if r["state"] == "ACQUIRED"}
    assert sorted(holders.values()) == sorted([len(held), len(given)])
    assert all(0 < r["lock_expires_in_ms"] <= 30_000 for r in partition["in_flight"])
    # kafka-sim groups lists and describes it
    tools = Tools(bootstrap)
    assert tools.ok("groups", "--list").split() == ["workers"]
    described = tools.ok("groups", "--describe", "--group", "workers", "--members")
    rows = [line.split() for line in described.strip().splitlines()[1:]]
    assert [(r[0], r[4]) for r in rows] == [("workers", "1"), ("workers", "1")], described
    state = tools.ok("groups", "--describe", "--group", "workers", "--state")
    assert state.strip().splitlines()[-1].split()[-3:] == ["simple", "Stable", "2"], state
    delivered = {}
    for consumer, messages in ((first, held), (second, given)):
        for m in messages:
            delivered.setdefault(m.value(), []).append(consumer)
            consumer.acknowledge(m, ACCEPT)
        consumer.commit_sync()
    deadline = time.monotonic() + 30
    while len(delivered) < 20:
        assert time.monotonic() < deadline, sorted(delivered)
        for consumer in (first, second):
            for m in consumer.poll(0.1):
                delivered.setdefault(m.value(), []).append(consumer)
                consumer.acknowledge(m, ACCEPT)
            consumer.commit_sync()
    assert sorted(delivered) == sorted(b"%d" % i for i in range(20))
    assert all(len(by) == 1 for by in delivered.values())  # each record to one consumer, once
    first.close()
    second.close()


def test_a_record_whose_lock_expires_is_delivered_again_with_a_higher_delivery_count(
        kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic_of_single_batches(bootstrap, "locks", 3)
    read_from_earliest(bootstrap, "slow")
    kafka_broker.call(kafka_broker.cluster.freeze_clock)
    first = share_consumer(bootstrap, "slow", "locks")
    taken = poll_some(first)
    assert [m.delivery_count() for m in taken] == [1] * len(taken)
    # The lock (group.share.record.lock.duration.ms, 30 s) runs out on the broker's clock
    kafka_broker.call(lambda: kafka_broker.cluster.advance_clock(30_000))
    second = share_consumer(bootstrap, "slow", "locks")
    again = poll_some(second)
    assert [(m.offset(), m.delivery_count()) for m in again] == [
        (m.offset(), 2) for m in taken]
    for m in again:
        second.acknowledge(m, ACCEPT)
    second.commit_sync()
    second.close()
    first.close()


@pytest.mark.broker_config({"group.share.delivery.count.limit": "2"})
def test_rejected_records_are_archived_and_released_ones_come_back_until_the_limit(
        kafka_broker):
    bootstrap = kafka_broker.bootstrap
    producer = topic_of_single_batches(bootstrap, "jobs", 4)
    read_from_earliest(bootstrap, "judges")
    consumer = share_consumer(bootstrap, "judges", "jobs")
    verdicts = {b"0": ACCEPT, b"1": REJECT, b"2": RELEASE, b"3": RELEASE}
    # 0-3 once, then 2 and 3 a second time
    seen = [(m.value(), m.delivery_count())
            for m in consume(consumer, 6, lambda m: verdicts[m.value()])]
    assert sorted(seen) == [(b"0", 1), (b"1", 1), (b"2", 1), (b"2", 2), (b"3", 1), (b"3", 2)]
    # Released at their delivery count limit, 2 and 3 are archived: the next record is next.
    producer.produce("jobs", b"4")
    assert producer.flush(10) == 0
    (last,) = poll_some(consumer)
    assert (last.value(), last.delivery_count()) == (b"4", 1)
    consumer.acknowledge(last, ACCEPT)
    consumer.commit_sync()
    # kafka-sim groups: the share partition's start offset, past everything done with
    described = Tools(bootstrap).ok("groups", "--describe", "--group", "judges")
    assert described.strip().splitlines()[-1].split() == ["judges", "jobs", "0", "5"], described
    consumer.close()


# -- the protocol, with raw requests ---------------------------------------------------------------

class ShareMember:
    """One share group member's requests over its own connection."""

    def __init__(self, client: RawClient, group: str, member_id: str) -> None:
        self.client, self.group, self.member_id = client, group, member_id
        self.epoch = 0
        self.session_epoch = 0

    async def beat(self, topics: list[str] | None = None, epoch: int | None = None):
        answer = await self.client.request(SHARE_HEARTBEAT, 1, {
            "group_id": self.group, "member_id": self.member_id,
            "member_epoch": self.epoch if epoch is None else epoch, "rack_id": None,
            "subscribed_topic_names": topics})
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
        return answer

    async def fetch(self, partitions: dict[bytes, list[int]], *, epoch: int | None = None,
                    acks: dict[tuple[bytes, int], list[tuple[int, int, list[int]]]] | None = None,
                    max_records: int = 100, max_wait_ms: int = 0, max_bytes: int = 1 << 20,
                    version: int = 1, mode: int = 0):
        acks = acks or {}
        answer = await self.client.request(SHARE_FETCH, version, {
            "share_acquire_mode": mode,
            "group_id": self.group, "member_id": self.member_id,
            "share_session_epoch": self.session_epoch if epoch is None else epoch,
            "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
            "max_records": max_records, "batch_size": max_records,
            "topics": [{"topic_id": t, "partitions": [
                {"partition_index": p, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": la, "acknowledge_types": types}
                    for f, la, types in acks.get((t, p), [])]} for p in ps]}
                for t, ps in partitions.items()],
            "forgotten_topics_data": []})
        if answer.error_code == 0 and epoch is None:
            self.session_epoch += 1
        return answer


def acquired(answer) -> dict[int, list[tuple[int, int, int]]]:
    return {p.partition_index: [(r.first_offset, r.last_offset, r.delivery_count)
                                for r in p.acquired_records]
            for t in answer.responses for p in t.partitions if p.acquired_records}


async def share_setup(port: int, group: str, topic: str, records: int):
    """A one-partition topic of `records` records, the group's coordinator loaded, and the group
    reading from the earliest offset."""
    client = await RawClient.connect(port)
    await create_topic(client, topic, 1)
    if records:
        batch = encode_batch([(None, b"%d" % i, (), None) for i in range(records)])
        answer = await client.request(PRODUCE, 9, produce_body({(topic, 0): batch}))
        assert answer.responses[0].partition_responses[0].error_code == 0
    ids = await topic_ids(client, topic)
    altered = await client.request(44, 1, {"resources": [{
        "resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0,
             "value": "earliest"}]}], "validate_only": False})
    assert altered.responses[0].error_code == 0, altered
    for _ in range(500):  # the first FindCoordinator makes __consumer_offsets; then it loads
        found = await client.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        described = await client.request(SHARE_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False})
        if found.error_code == 0 and described.groups[0].error_code not in (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                ErrorCode.COORDINATOR_NOT_AVAILABLE):
            break
        await asyncio.sleep(0.01)
    return client, ids[topic]


async def test_share_group_heartbeat_assigns_and_describe_shows_the_group(async_broker):
    client, topic_id = await share_setup(async_broker.port, "sg", "st", 0)
    a = ShareMember(await RawClient.connect(async_broker.port), "sg", "member-a")
    b = ShareMember(await RawClient.connect(async_broker.port), "sg", "member-b")
    joined = await a.beat(["st"])
    assert (joined.error_code, joined.member_epoch) == (0, 1)
    assert [(bytes(tp.topic_id), list(tp.partitions))
            for tp in joined.assignment.topic_partitions] == [(topic_id, [0])]
    assert (await b.beat(["st"])).member_epoch == 2
    # More members than partitions: both are given partition 0 (they share it)
    answer = await a.beat()
    assert answer.member_epoch == 2
    assert [list(tp.partitions) for tp in answer.assignment.topic_partitions] == [[0]]
    assert (await a.beat()).assignment is None  # unchanged: not sent again
    described = await client.request(SHARE_DESCRIBE, 1, {
        "group_ids": ["sg", "nobody"], "include_authorized_operations": False})
    group, unknown = described.groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch,
            group.assignor_name) == (0, "Stable", 2, 2, "simple")
    assert sorted((m.member_id, m.member_epoch, list(m.subscribed_topic_names),
                   [(tp.topic_name, list(tp.partitions)) for tp in m.assignment.topic_partitions])
                  for m in group.members) == [("member-a", 2, ["st"], [("st", [0])]),
                                              ("member-b", 2, ["st"], [("st", [0])])]
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Group nobody not found.")
    left = await b.beat(epoch=-1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    for client_ in (client, a.client, b.client):
        await client_.close()


async def test_share_group_heartbeat_refusals(async_broker):
    client, _ = await share_setup(async_broker.port, "sr", "srt", 0)
    member = ShareMember(client, "sr", "m")
    cases = [
        ({"member_id": ""}, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        ({"member_epoch": -2}, ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
        ({"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST,
         "SubscribedTopicNames must be set in first request."),
        ({"member_epoch": 3, "member_id": "ghost"}, ErrorCode.UNKNOWN_MEMBER_ID, None),
    ]
    for change, code, message in cases:
        body = {"group_id": "sr", "member_id": "m", "member_epoch": 0, "rack_id": None,
                "subscribed_topic_names": ["srt"], **change}
        answer = await client.request(SHARE_HEARTBEAT, 1, body)
        assert answer.error_code == code, change
        if message is not None:
            assert answer.error_message == message
    assert (await member.beat(["srt"])).error_code == 0
    fenced = await member.beat(epoch=member.epoch + 5)
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    await client.close()


async def test_share_fetch_acquires_acknowledges_and_keeps_its_session(async_broker):
    client, tid = await share_setup(async_broker.port, "sf", "sft", 5)
    member = ShareMember(client, "sf", "m1")
    assert (await member.beat(["sft"])).error_code == 0
    # Acknowledgements on a session's first request are refused; so is a session never opened.
    refused = await member.fetch({tid: [0]}, acks={(tid, 0): [(0, 0, [1])]})
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    assert (await member.fetch({tid: [0]}, epoch=4)).error_code == \
        ErrorCode.SHARE_SESSION_NOT_FOUND
    first = await member.fetch({tid: [0]}, max_records=2)
    assert (first.error_code, first.acquisition_lock_timeout_ms) == (0, 30_000)
    assert acquired(first) == {0: [(0, 4, 1)]}  # one batch of 5: whole batches are given
    assert bytes(first.responses[0].partitions[0].records)  # the batch itself
    # An epoch out of turn; then offsets not acquired: the partition's acknowledge error, and
    # the fetch goes on.
    assert (await member.fetch({tid: [0]}, epoch=7)).error_code == \
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    bad = await member.fetch({tid: [0]}, acks={(tid, 0): [(3, 9, [1])]})
    (p,) = bad.responses[0].partitions
    assert (p.error_code, p.acknowledge_error_code) == (0, ErrorCode.INVALID_RECORD_STATE)
    # Accept 0-2, release 3, reject 4: 3 comes back with delivery count 2
    again = await member.fetch({tid: [0]}, acks={(tid, 0): [(0, 2, [1]), (3, 4, [2, 3])]})
    assert again.responses[0].partitions[0].acknowledge_error_code == 0
    assert acquired(again) == {0: [(3, 3, 2)]}
    # The session's final fetch may carry acknowledgements, not forgotten partitions
    forgetting = await client.request(SHARE_FETCH, 1, {
        "group_id": "sf", "member_id": "m1", "share_session_epoch": -1, "max_wait_ms": 0,
        "min_bytes": 1, "max_bytes": 1024, "max_records": 1, "batch_size": 1, "topics": [],
        "forgotten_topics_data": [{"topic_id": tid, "partitions": [0]}]})
    assert forgetting.error_code == ErrorCode.INVALID_REQUEST
    acked = await client.request(SHARE_ACK, 1, {
        "group_id": "sf", "member_id": "m1", "share_session_epoch": -1,
        "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0,
                                                      "acknowledgement_batches": [
                                                          {"first_offset": 3, "last_offset": 3,
                                                           "acknowledge_types": [1]}]}]}]})
    assert (acked.error_code, acked.responses[0].partitions[0].error_code) == (0, 0)
    # -1 closed the session
    assert (await member.fetch({tid: [0]})).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    # No session reads it any more: the share partition leaves memory (its state is kept)
    manager = async_broker.share_partition_manager
    await until(lambda: ("sf", "sft", 0) not in manager.share_partitions)
    # DescribeShareGroupOffsets: the start offset its share coordinator keeps
    offsets = await client.request(DESCRIBE_OFFSETS, 0, {"groups": [
        {"group_id": "sf", "topics": None},
        {"group_id": "sf", "topics": [{"topic_name": "nope", "partitions": [0]}]},
        {"group_id": "nobody", "topics": None}]})
    kept, unknown, missing = offsets.groups
    assert [(t.topic_name, p.partition_index, p.start_offset, p.error_code)
            for t in kept.topics for p in t.partitions] == [("sft", 0, 5, 0)]
    assert [p.error_code for t in unknown.topics for p in t.partitions] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    await client.close()


async def test_share_fetch_v2_acquires_to_the_record_limit_and_renews_locks(async_broker):
    """KIP-1206: ShareAcquireMode record-limit (1) acquires no more than MaxRecords, cutting a
    batch; batch-optimized (0) takes the rest of the batch. KIP-1222: Renew acknowledgements
    (type 4, v2 only) keep records acquired under a new lock; a renew-only fetch (mode 255)
    acquires nothing."""
    client, tid = await share_setup(async_broker.port, "s2", "s2t", 5)  # one batch, 0-4
    member = ShareMember(client, "s2", "m1")
    assert (await member.beat(["s2t"])).error_code == 0
    assert acquired(await member.fetch({tid: [0]}, version=2, mode=1, max_records=2)) == {
        0: [(0, 1, 1)]}
    assert acquired(await member.fetch({tid: [0]}, version=2, mode=1, max_records=2)) == {
        0: [(2, 3, 1)]}
    assert acquired(await member.fetch({tid: [0]}, version=2, mode=0, max_records=1)) == {
        0: [(4, 4, 1)]}
    share = async_broker.share_partition_manager.share_partitions[("s2", "s2t", 0)]
    lock = share.in_flight[0].lock

    def ack(types: list[int], *, renew: bool = True, version: int = 2) -> dict:
        return {"group_id": "s2", "member_id": "m1", "share_session_epoch": member.session_epoch,
                "is_renew_ack": renew, "topics": [{"topic_id": tid, "partitions": [
                    {"partition_index": 0, "acknowledgement_batches": [
                        {"first_offset": 0, "last_offset": 1, "acknowledge_types": types}]}]}]}

    # Renew needs v2 (v1: not an acknowledge type) and, in ShareAcknowledge, IsRenewAck
    old = await client.request(SHARE_ACK, 1, ack([4]))
    member.session_epoch += 1
    assert old.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    assert (await client.request(SHARE_ACK, 2, ack([4], renew=False))).error_code == \
        ErrorCode.INVALID_REQUEST
    renewed = await client.request(SHARE_ACK, 2, ack([4]))
    member.session_epoch += 1
    assert (renewed.error_code, renewed.responses[0].partitions[0].error_code) == (0, 0)
    assert renewed.acquisition_lock_timeout_ms == 30_000
    assert share.in_flight[0].lock is not lock and share.in_flight[0].lock is share.in_flight[
        1].lock and share.in_flight[2].lock is not share.in_flight[0].lock  # 2-3 kept theirs
    assert [share.in_flight[o].delivery_count for o in range(5)] == [1] * 5
    # A renew-only fetch renews and acquires nothing; an unknown mode is refused
    only = await member.fetch({tid: [0]}, version=2, mode=-1,
                              acks={(tid, 0): [(2, 4, [4])]})
    assert only.responses[0].partitions[0].acknowledge_error_code == 0 and acquired(only) == {}
    assert (await member.fetch({tid: [0]}, version=2, mode=7)).error_code == \
        ErrorCode.INVALID_REQUEST
    done = await member.fetch({tid: [0]}, version=2, acks={(tid, 0): [(0, 4, [1])]})
    assert done.responses[0].partitions[0].acknowledge_error_code == 0
    assert share.start_offset == 5
    await client.close()


async def test_a_parked_share_fetch_is_answered_by_an_append(async_broker):
    client, tid = await share_setup(async_broker.port, "sp", "spt", 0)
    member = ShareMember(await RawClient.connect(async_broker.port), "sp", "m1")
    assert (await member.beat(["spt"])).error_code == 0
    assert acquired(await member.fetch({tid: [0]})) == {}  # opens the session: nothing yet
    parked = asyncio.ensure_future(member.fetch({}, max_wait_ms=60_000))
    manager = async_broker.share_partition_manager
    while manager.purgatory.delayed == 0:
        await asyncio.sleep(0.005)
    batch = encode_batch([(None, b"late", (), None)])
    await client.request(PRODUCE, 9, produce_body({("spt", 0): batch}))
    answer = await asyncio.wait_for(parked, 10)
    assert acquired(answer) == {0: [(0, 0, 1)]}
    await member.client.close()
    await client.close()


async def test_share_requests_name_unknown_topics_and_refuse_empty_ids(async_broker):
    client, tid = await share_setup(async_broker.port, "su", "sut", 1)
    member = ShareMember(client, "su", "m1")
    ghost = uuid.uuid4().bytes
    answer = await member.fetch({ghost: [0], tid: [0]})
    errors = {bytes(t.topic_id): [p.error_code for p in t.partitions] for t in answer.responses}
    assert errors == {ghost: [ErrorCode.UNKNOWN_TOPIC_ID], tid: [0]}
    empty = await client.request(SHARE_FETCH, 1, {
        "group_id": "su", "member_id": "", "share_session_epoch": 0, "max_wait_ms": 0,
        "min_bytes": 1, "max_bytes": 1024, "max_records": 1, "batch_size": 1, "topics": [],
        "forgotten_topics_data": []})
    assert (empty.error_code, empty.error_message) == (ErrorCode.INVALID_REQUEST,
                                                       "MemberId can't be empty.")
    await client.close()


@pytest.mark.broker_config({"feature.levels": "share.version=0"})
async def test_share_version_0_hides_the_share_group_apis(async_broker):
    client = await RawClient.connect(async_broker.port)
    versions = await client.request(API_VERSIONS, 3, {"client_software_name": "t",
                                                      "client_software_version": "1"})
    keys = {k.api_key for k in versions.api_keys}
    assert keys.isdisjoint({SHARE_HEARTBEAT, SHARE_DESCRIBE, SHARE_FETCH, SHARE_ACK, 83, 84, 85,
                            86, 90, 91, 92})
    assert "share.version" not in {f.name for f in versions.finalized_features}
    beat = await client.request(SHARE_HEARTBEAT, 1, {
        "group_id": "g", "member_id": "m", "member_epoch": 0, "rack_id": None,
        "subscribed_topic_names": ["t"]})
    assert beat.error_code == ErrorCode.UNSUPPORTED_VERSION
    await client.close()


def test_a_share_partition_goes_on_from_its_kept_state_when_its_leader_stops(broker_factory):
    """Acknowledgements and releases are written to the share coordinator (__share_group_state):
    when the partition's leader stops, the new leader starts the share partition from that
    state, so accepted records are not delivered again and released ones come back with their
    delivery count."""
    cluster = broker_factory({"offsets.topic.replication.factor": "3",
                              "offsets.topic.num.partitions": "3",
                              "share.coordinator.state.topic.num.partitions": "3"}, brokers=3)
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("durable", 1, 3)])["durable"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(10):
        producer.produce("durable", b"%d" % i)
        assert producer.flush(10) == 0
    read_from_earliest(bootstrap, "durables")
    first = share_consumer(bootstrap, "durables", "durable")
    consume(first, 10, lambda m: ACCEPT if int(m.value()) < 5 else RELEASE)
    first.close()
    (partition,) = cluster.call(lambda: cluster.cluster.partitions("durable"))
    cluster.call(lambda: cluster.cluster.stop_broker(partition["leader"]))
    second = share_consumer(bootstrap, "durables", "durable")
    again = {m.value(): m.delivery_count() for m in consume(second, 5, timeout_s=60)}
    assert again == {b"%d" % i: 2 for i in range(5, 10)}
    second.close()


def test_a_restarted_broker_loads_the_share_state_it_kept(kafka_broker):
    """The share coordinator loads __share_group_state on start-up: after a restart the group
    goes on where its acknowledgements left it."""
    bootstrap = kafka_broker.bootstrap
    topic_of_single_batches(bootstrap, "kept", 5)
    read_from_earliest(bootstrap, "keepers")
    consumer = share_consumer(bootstrap, "keepers", "kept")
    consume(consumer, 5, lambda m: ACCEPT if int(m.value()) < 3 else RELEASE)
    consumer.close()
    kafka_broker.restart()
    consumer = share_consumer(kafka_broker.bootstrap, "keepers", "kept")
    again = {m.value(): m.delivery_count() for m in consume(consumer, 2, timeout_s=60)}
    assert again == {b"3": 2, b"4": 2}
    consumer.close()


def set_group_config(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(10)


def test_share_isolation_level_read_committed_leaves_aborted_records_out(kafka_broker):
    """share.isolation.level (a group config) read_committed: records below the last stable
    offset only, aborted transactions' records archived, never delivered; read_uncommitted
    groups are given them all."""
    bootstrap = kafka_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("txns", 1, 1)])["txns"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "share-txn"})
    producer.init_transactions(30)
    for values, commit in (([b"c0", b"c1"], True), ([b"a0", b"a1"], False), ([b"c2"], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce("txns", v)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    read: dict[str, list[bytes]] = {}
    for group, level, count in (("committed", "read_committed", 3),
                                ("everything", "read_uncommitted", 5)):
        set_group_config(bootstrap, group, share_auto_offset_reset="earliest",
                         share_isolation_level=level)
        consumer = share_consumer(bootstrap, group, "txns")
        read[group] = [m.value() for m in consume(consumer, count)]
        assert not list(consumer.poll(0.5))  # nothing more: the markers are not records
        consumer.close()
    assert read == {"committed": [b"c0", b"c1", b"c2"],
                    "everything": [b"c0", b"c1", b"a0", b"a1", b"c2"]}


def test_a_topic_deleted_and_made_again_is_read_afresh(kafka_broker):
    """The share partition of a deleted topic is not the new topic's (they differ by topic id):
    the group reads the new one from its start."""
    bootstrap = kafka_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic_of_single_batches(bootstrap, "again", 3)
    read_from_earliest(bootstrap, "afresh")
    consumer = share_consumer(bootstrap, "afresh", "again")
    first = [m.offset() for m in consume(consumer, 3)]
    consumer.close()
    admin.delete_topics(["again"])["again"].result(10)
    deadline = time.monotonic() + 30
    while True:  # the name is free once every replica deleted its log
        try:
            admin.create_topics([NewTopic("again", 1, 1)])["again"].result(10)
            break
        except Exception:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in (b"new-0", b"new-1"):
        producer.produce("again", value)
    assert producer.flush(10) == 0
    consumer = share_consumer(bootstrap, "afresh", "again")
    second = [(m.offset(), m.value()) for m in consume(consumer, 2)]
    consumer.close()
    assert (first, second) == ([0, 1, 2], [(0, b"new-0"), (1, b"new-1")])


async def test_an_idle_share_session_expires_and_its_records_go_to_others(async_broker):
    """A consumer that vanishes without closing its session: after the group's
    share.session.timeout.ms (a timer task) the session goes, and the records it held are
    Available again, before their locks would have run out."""
    client, tid = await share_setup(async_broker.port, "se", "set", 2)
    altered = await client.request(44, 1, {"resources": [{
        "resource_type": 32, "resource_name": "se", "configs": [
            {"name": "share.record.lock.duration.ms", "config_operation": 0,
             "value": "600000"}]}], "validate_only": False})
    assert altered.responses[0].error_code == 0
    gone = ShareMember(client, "se", "gone")
    assert acquired(await gone.fetch({tid: [0]})) == {0: [(0, 1, 1)]}
    async_broker.context.freeze_clock()
    async_broker.context.advance_clock(45_000)  # share.session.timeout.ms
    assert (await gone.fetch({tid: [0]})).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    other = ShareMember(await RawClient.connect(async_broker.port), "se", "other")
    assert acquired(await other.fetch({tid: [0]})) == {0: [(0, 1, 2)]}
    await other.client.close()
    await client.close()


async def test_alter_share_group_offsets_resets_an_empty_group(async_broker):
    """AlterShareGroupOffsets: refused while the group has a member (NON_EMPTY_GROUP); once it
    is empty, the partition's state is set afresh at the start offset given (a newer state
    epoch), and the next member is given records from there."""
    client, tid = await share_setup(async_broker.port, "sa", "sat", 5)
    member = ShareMember(client, "sa", "m1")
    assert (await member.beat(["sat"])).error_code == 0
    assert acquired(await member.fetch({tid: [0]})) == {0: [(0, 4, 1)]}
    done = await member.fetch({tid: [0]}, epoch=-1, acks={(tid, 0): [(0, 4, [1])]})  # accepted
    assert done.responses[0].partitions[0].acknowledge_error_code == 0

    async def alter(offset: int) -> list[tuple[int, int]]:
        answer = await client.request(ALTER_OFFSETS, 0, {"group_id": "sa", "topics": [
            {"topic_name": "sat", "partitions": [{"partition_index": 0,
                                                  "start_offset": offset}]},
            {"topic_name": "nope", "partitions": [{"partition_index": 0,
                                                   "start_offset": 0}]}]})
        return [(p.partition_index, p.error_code) for t in answer.responses
                for p in t.partitions]

    assert await alter(1) == [(0, ErrorCode.NON_EMPTY_GROUP), (0, ErrorCode.NON_EMPTY_GROUP)]
    assert (await member.beat(epoch=-1)).error_code == 0
    assert await alter(1) == [(0, 0), (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    offsets = await client.request(DESCRIBE_OFFSETS, 0, {"groups": [
        {"group_id": "sa", "topics": [{"topic_name": "sat", "partitions": [0]}]}]})
    assert offsets.groups[0].topics[0].partitions[0].start_offset == 1
    again = ShareMember(await RawClient.connect(async_broker.port), "sa", "m2")
    assert (await again.beat(["sat"])).error_code == 0
    assert acquired(await again.fetch({tid: [0]})) == {0: [(1, 4, 1)]}
    await again.client.close()
    await client.close()


def test_a_new_coordinator_loads_the_share_group_from_its_records(broker_factory):
    """A share group's records in __consumer_offsets (key versions 10-15): when its
    coordinator's broker stops, the next coordinator has the group (here empty, its member
    gone: nobody would have made it again), with its epoch."""
    cluster = broker_factory({"offsets.topic.replication.factor": "3",
                              "offsets.topic.num.partitions": "3",
                              "share.coordinator.state.topic.num.partitions": "3"}, brokers=3)
    bootstrap = cluster.bootstrap
    topic_of_single_batches(bootstrap, "moved", 2)
    read_from_earliest(bootstrap, "movers")
    consumer = share_consumer(bootstrap, "movers", "moved")
    for m in poll_some(consumer):
        consumer.acknowledge(m, ACCEPT)
    consumer.commit_sync()
    consumer.close()  # it leaves: the group's epoch moves on, no member

    def views() -> list[tuple]:
        return [(b.broker_id, g.group_epoch, sorted(g.members), g.state_partitions)
                for b in cluster.cluster.brokers.values() if b.running
                for g in b.group_coordinator.share_groups.values()]

    ((coordinator, epoch, members, state),) = cluster.call(views)
    assert (epoch, members, state) == (2, [], {"moved": {0}})
    cluster.call(lambda: cluster.cluster.stop_broker(coordinator))
    deadline = time.monotonic() + 30
    while not (moved := cluster.call(views)):
        assert time.monotonic() < deadline, "no coordinator loaded the group"
        time.sleep(0.01)
    # (with the partitions it has share state for: key version 15)
    assert [(e, m, s) for b, e, m, s in moved] == [(2, [], {"moved": {0}})]
    assert moved[0][0] != coordinator


async def test_delete_share_group_offsets_forgets_a_topic_of_an_empty_group(async_broker):
    client, tid = await share_setup(async_broker.port, "sd", "sdt", 3)
    member = ShareMember(client, "sd", "m1")
    assert (await member.beat(["sdt"])).error_code == 0
    assert acquired(await member.fetch({tid: [0]})) == {0: [(0, 2, 1)]}
    await member.fetch({tid: [0]}, epoch=-1, acks={(tid, 0): [(0, 2, [1])]})

    async def delete() -> tuple[int, list[tuple[str, int]]]:
        answer = await client.request(DELETE_OFFSETS, 0, {"group_id": "sd", "topics": [
            {"topic_name": "sdt"}, {"topic_name": "nope"}]})
        return answer.error_code, [(t.topic_name, t.error_code) for t in answer.responses]

    assert await delete() == (ErrorCode.NON_EMPTY_GROUP, [])
    assert (await member.beat(epoch=-1)).error_code == 0
    assert await delete() == (0, [("sdt", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
    offsets = await client.request(DESCRIBE_OFFSETS, 0, {"groups": [{"group_id": "sd",
                                                                     "topics": None}]})
    assert offsets.groups[0].topics == []  # no member subscribes; and nothing is kept:
    described = await client.request(DESCRIBE_OFFSETS, 0, {"groups": [
        {"group_id": "sd", "topics": [{"topic_name": "sdt", "partitions": [0]}]}]})
    assert described.groups[0].topics[0].partitions[0].start_offset == -1
    again = ShareMember(await RawClient.connect(async_broker.port), "sd", "m2")
    assert (await again.beat(["sdt"])).error_code == 0
    assert acquired(await again.fetch({tid: [0]})) == {0: [(0, 2, 1)]}  # from the start
    await again.client.close()
    await client.close()


async def test_deleting_a_share_group_deletes_its_share_state(async_broker):
    """DeleteGroups of an empty share group deletes the share state of every partition its
    members were given (ShareGroupStatePartitionMetadata, key version 15): a group made again
    under its id starts afresh instead of where the old one stopped."""
    client, tid = await share_setup(async_broker.port, "sg", "sgt", 3)
    member = ShareMember(client, "sg", "m1")
    assert (await member.beat(["sgt"])).error_code == 0
    assert acquired(await member.fetch({tid: [0]})) == {0: [(0, 2, 1)]}
    await member.fetch({tid: [0]}, epoch=-1, acks={(tid, 0): [(0, 2, [1])]})
    assert (await member.beat(epoch=-1)).error_code == 0
    coordinator = async_broker.group_coordinator
    assert coordinator.share_state_partitions("sg") == {"sgt": {0}}
    deleted = await client.request(DELETE_GROUPS, 2, {"groups_names": ["sg"]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("sg", 0)]
    assert "sg" not in coordinator.share_groups
    again = ShareMember(await RawClient.connect(async_broker.port), "sg", "m2")
    assert (await again.beat(["sgt"])).error_code == 0
    assert acquired(await again.fetch({tid: [0]})) == {0: [(0, 2, 1)]}  # from the start
    await again.client.close()
    await client.close()


async def test_max_bytes_0_is_given_nothing_and_a_deleted_topic_is_unknown(async_broker):
    """ShareFetch MaxBytes 0 acquires nothing (as Kafka; librdkafka's 0180 checks it). A
    session's partition whose topic was deleted and made again under its name answers
    UNKNOWN_TOPIC_ID: the new topic's records are not handed out under the old id."""
    client, tid = await share_setup(async_broker.port, "sz", "szt", 2)
    member = ShareMember(client, "sz", "m1")
    answer = await member.fetch({tid: [0]}, max_bytes=0)
    assert (answer.error_code, acquired(answer)) == (0, {})
    assert acquired(await member.fetch({tid: [0]})) == {0: [(0, 1, 1)]}
    deleted = await client.request(20, 6, {"topics": [{"name": "szt", "topic_id": b"\0" * 16}],
                                           "timeout_ms": 30_000})
    assert deleted.responses[0].error_code == 0
    await until(lambda: async_broker.metadata_cache.topic("szt") is None)
    await create_topic(client, "szt", 1)
    batch = encode_batch([(None, b"new", (), None)])
    await client.request(PRODUCE, 9, produce_body({("szt", 0): batch}))
    gone = await member.fetch({})
    assert [(bytes(t.topic_id), p.error_code, list(p.acquired_records))
            for t in gone.responses for p in t.partitions] == [
        (tid, ErrorCode.UNKNOWN_TOPIC_ID, [])]
    await client.close()
