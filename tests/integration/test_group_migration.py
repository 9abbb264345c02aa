"""KIP-848's migration between classic and consumer groups with real clients: a kafka-python
consumer (classic protocol) and confluent-kafka consumers with `group.protocol=consumer` in one
group. A classic group with members becomes a consumer group when a consumer-protocol member
joins (upgrade), classic members go on inside it (JoinGroup, SyncGroup, Heartbeat answered by
the consumer group), and the group is a classic one again when its last consumer-protocol member
leaves (downgrade)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from kafka import KafkaConsumer

from broker.control.ctl import group_detail
from protocol.errors import ErrorCode
from protocol.group_records import decode_assignment, encode_consumer_protocol
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_consumer_group_protocol import members, topic_with_records

GROUP, TOPIC = "migrating", "migration"
JOIN_GROUP, CLASSIC_HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, OFFSET_COMMIT = 11, 12, 13, 14, 8


def view(broker) -> dict:
    (group,) = broker.call(lambda: broker.cluster.groups(GROUP))
    return group


def poll_until(done, classic: KafkaConsumer | None, modern: list[Consumer],
               seen: list[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline
        if classic is not None:
            for records in classic.poll(timeout_ms=50).values():
                seen += [r.value for r in records]
        for c in modern:
            message = c.poll(0.05)
            if message is not None and message.error() is None:
                seen.append(message.value())


def modern_consumer(bootstrap: str, name: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    return consumer


def classic_consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                         client_id="classic", auto_offset_reset="earliest",
                         session_timeout_ms=6000, heartbeat_interval_ms=200,
                         max_poll_interval_ms=30000)


def member_views(broker) -> list[tuple[str, str, int]]:
    """(client id, member type, partitions) of the group's members."""
    return sorted((m["client_id"], m.get("member_type", "classic"),
                   sum(len(ps) for ps in m["assignment"].values()))
                  for m in view(broker)["members"])


@pytest.mark.broker_config({"group.consumer.heartbeat.interval.ms": "200"})
def test_a_classic_group_is_upgraded_and_downgraded_online(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic_with_records(bootstrap, TOPIC, 4, 1, 40)
    seen: list[bytes] = []
    classic = classic_consumer(bootstrap)
    try:
        poll_until(lambda: len(classic.assignment()) == 4, classic, [], seen)
        assert view(kafka_broker)["type"] == "classic"
        # A consumer-protocol member joins: the group becomes a consumer group, the classic
        # member stays in it, and the uniform assignor splits the partitions between them.
        modern = modern_consumer(bootstrap, "modern")
        poll_until(lambda: view(kafka_broker)["type"] == "consumer"
                   and member_views(kafka_broker) == [("classic", "classic", 2),
                                                 ("modern", "consumer", 2)]
                   and len(classic.assignment()) == 2, classic, [modern], seen)
        poll_until(lambda: set(seen) >= {b"%d" % i for i in range(40)}, classic, [modern], seen)
        # The last consumer-protocol member leaves: a classic group again, which rebalances
        # and gives the classic member everything.
        modern.close()
        poll_until(lambda: view(kafka_broker)["type"] == "classic"
                   and len(classic.assignment()) == 4, classic, [], seen)
        assert view(kafka_broker)["state"] == "Stable"
    finally:
        classic.close()


@pytest.mark.broker_config({"group.consumer.heartbeat.interval.ms": "200"})
def test_a_classic_member_joins_a_consumer_group(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic_with_records(bootstrap, TOPIC, 4, 1, 40)
    seen: list[bytes] = []
    modern = modern_consumer(bootstrap, "modern")
    try:
        poll_until(lambda: len(modern.assignment()) == 4, None, [modern], seen)
        classic = classic_consumer(bootstrap)
        try:
            poll_until(lambda: member_views(kafka_broker) == [("classic", "classic", 2),
                                                         ("modern", "consumer", 2)]
                       and len(classic.assignment()) == 2 and len(modern.assignment()) == 2,
                       classic, [modern], seen)
            assert view(kafka_broker)["type"] == "consumer"
            shown = group_detail(view(kafka_broker))  # `kafka-sim ctl groups migrating`
            types = {line.split()[2]: line.split()[4] for line in shown.splitlines()
                     if line.split()[:1] and len(line.split()) > 5 and line.split()[2] in (
                         "classic", "modern")}
            assert types == {"classic": "classic", "modern": "consumer"}, shown
            poll_until(lambda: set(seen) >= {b"%d" % i for i in range(40)}, classic, [modern],
                       seen)
            classic.commit()  # a classic member commits with its member epoch as generation
        finally:
            classic.close()  # LeaveGroup: the consumer-protocol member gets everything back
        poll_until(lambda: len(modern.assignment()) == 4, None, [modern], seen)
        assert view(kafka_broker)["type"] == "consumer"
    finally:
        modern.close()


async def classic_join(client: RawClient, group: str, topics: list[str],
                       member_id: str = "") -> tuple[ErrorCode, str, int]:
    """A kafka-python-like JoinGroup v5 (MEMBER_ID_REQUIRED answered by joining again)."""
    body = {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_consumer_protocol(topics)}]}
    answer = await client.request(JOIN_GROUP, 5, body)
    if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        answer = await client.request(JOIN_GROUP, 5, {**body, "member_id": answer.member_id})
    return ErrorCode(answer.error_code), answer.member_id, answer.generation_id


async def sync(client: RawClient, group: str, member_id: str, generation: int):
    return await client.request(SYNC_GROUP, 5, {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": []})


async def test_a_classic_member_in_a_consumer_group_is_held_to_its_epoch(async_broker):
    a, b = await members(async_broker.port, "mixed", "mx", 2, 4)
    await a.join(["mx"])
    client = b.client
    error, member_id, generation = await classic_join(client, "mixed", ["mx"])
    assert (error, generation) == (ErrorCode.NONE, 2)  # the epoch its joining made
    synced = await sync(client, "mixed", member_id, generation)
    # Uniform gives it two partitions, which a still owns: it waits, with none yet
    assert (synced.error_code, decode_assignment(bytes(synced.assignment)).partitions) == (0, {})
    beat = {"group_id": "mixed", "generation_id": generation, "member_id": member_id,
            "group_instance_id": None}
    assert (await client.request(CLASSIC_HEARTBEAT, 4, beat)).error_code == ErrorCode.NONE
    assert (await client.request(CLASSIC_HEARTBEAT, 4, {**beat, "generation_id": 7})).error_code \
        == ErrorCode.ILLEGAL_GENERATION
    assert (await sync(client, "mixed", member_id, 7)).error_code == ErrorCode.ILLEGAL_GENERATION
    commit = {"group_id": "mixed", "generation_id_or_member_epoch": 7, "member_id": member_id,
              "group_instance_id": None, "topics": [{"name": "mx", "partitions": [
                  {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                   "committed_metadata": None}]}]}
    answer = await client.request(OFFSET_COMMIT, 9, commit)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION
    answer = await client.request(OFFSET_COMMIT, 9, {**commit,
                                                     "generation_id_or_member_epoch": generation})
    assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE
    # a revokes what it must give up; the classic member is told to rejoin and gets it
    kept = a.assignment(await a.beat(owned={"mx": [0, 1, 2, 3]}))
    assert len(kept["mx"]) == 2
    await a.beat(owned=kept)
    assert (await client.request(CLASSIC_HEARTBEAT, 4, beat)).error_code == \
        ErrorCode.REBALANCE_IN_PROGRESS
    error, _, generation = await classic_join(client, "mixed", ["mx"], member_id)
    assert (error, generation) == (ErrorCode.NONE, 2)
    synced = await sync(client, "mixed", member_id, generation)
    assert decode_assignment(bytes(synced.assignment)).partitions == {
        "mx": sorted({0, 1, 2, 3} - set(kept["mx"]))}
    assert (await client.request(CLASSIC_HEARTBEAT, 4, beat)).error_code == ErrorCode.NONE
    # A LeaveGroup of the classic member: the consumer group goes on with a alone
    left = await client.request(LEAVE_GROUP, 3, {"group_id": "mixed", "members": [
        {"member_id": member_id, "group_instance_id": None}]})
    assert (left.error_code, left.members[0].error_code) == (0, 0)
    assert set(async_broker.group_coordinator.consumer_groups["mixed"].members) == {"member-0"}
    await a.client.close()
    await client.close()


@pytest.mark.broker_config({"group.consumer.migration.policy": "downgrade",
                            "group.initial.rebalance.delay.ms": "0"})
async def test_an_upgrade_the_policy_does_not_allow_is_refused(async_broker):
    a, b = await members(async_broker.port, "old", "ol", 2, 2)
    error, member_id, generation = await classic_join(b.client, "old", ["ol"])
    assert error == ErrorCode.NONE and (await sync(b.client, "old", member_id,
                                                   generation)).error_code == 0
    answer = await a.join(["ol"])
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group old to consumer group "
        "because the online upgrade is disabled.")
    assert async_broker.group_coordinator.group("old").members  # still the classic group
    for m in (a, b):
        await m.client.close()


async def test_a_classic_member_of_a_consumer_group_is_reloaded_as_one(async_broker):
    """Its classic metadata (session timeout, protocols) is in the member's record, as Kafka 4
    writes it: the coordinator that loads the group knows the member still speaks JoinGroup."""
    a, b = await members(async_broker.port, "kept", "kp", 2, 2)
    await a.join(["kp"])
    error, member_id, generation = await classic_join(b.client, "kept", ["kp"])
    assert error == ErrorCode.NONE
    coordinator = async_broker.group_coordinator
    partition = coordinator.manager.partition_for("kept")
    coordinator.on_leadership(partition, False)
    assert "kept" not in coordinator.consumer_groups
    coordinator.on_leadership(partition, True)
    await until(lambda: "kept" in coordinator.consumer_groups)
    member = coordinator.consumer_groups["kept"].members[member_id]
    assert member.classic is not None and member.classic.session_timeout_ms == 10_000
    assert [name for name, _ in member.classic.protocols] == ["range"]
    assert (await sync(b.client, "kept", member_id, generation)).error_code == 0
    for m in (a, b):
        await m.client.close()


@pytest.mark.broker_config({"group.initial.rebalance.delay.ms": "0"})
async def test_an_empty_group_of_either_kind_becomes_the_other(async_broker):
    a, b = await members(async_broker.port, "either", "ei", 2, 1)
    await a.join(["ei"])
    assert (await a.beat(epoch=-1)).error_code == 0  # it leaves: an empty consumer group
    coordinator = async_broker.group_coordinator
    assert not coordinator.consumer_groups["either"].members
    error, member_id, generation = await classic_join(b.client, "either", ["ei"])
    assert error == ErrorCode.NONE and "either" not in coordinator.consumer_groups
    assert (await sync(b.client, "either", member_id, generation)).error_code == 0
    assert list(coordinator.group("either").members) == [member_id]
    left = await b.client.request(LEAVE_GROUP, 3, {"group_id": "either", "members": [
        {"member_id": member_id, "group_instance_id": None}]})
    assert left.members[0].error_code == 0
    joined = await a.join(["ei"])  # an empty classic group: a consumer group again
    assert joined.error_code == 0 and "either" in coordinator.consumer_groups
    for m in (a, b):
        await m.client.close()
