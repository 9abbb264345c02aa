"""The classic group protocol over raw requests, time on the manual clock: every state transition
(Empty -> PreparingRebalance -> CompletingRebalance -> Stable, back, and Dead) and the errors
clients rely on."""

from __future__ import annotations

import asyncio

import pytest

from broker.coordinator.group.group_metadata import GroupMetadata, GroupState
from broker.coordinator.group.member import MemberMetadata
from broker.metadata.coordinator_keys import java_string_hash, kafka_abs
from protocol.errors import ErrorCode as E
from tests.cluster.group_helpers import (
    FIND_COORDINATOR,
    JOIN,
    LEAVE,
    REBALANCE_MS,
    SESSION_MS,
    Member,
    advance,
    group_state,
    join_body,
    start_cluster,
)
from tests.harness import until
from tests.integration.raw_client import RawClient


@pytest.fixture
async def cluster(tmp_path):
    cluster = await start_cluster(tmp_path)
    yield cluster
    await cluster.stop()


@pytest.fixture
async def port(cluster) -> int:
    return cluster.brokers[0].port


async def stable_pair(cluster, port: int) -> tuple[Member, Member]:
    """Two members in generation 2, m1 the leader, the group Stable."""
    m1 = await Member.connect(port)
    assert (await m1.join()).error_code == 0
    assert (await m1.sync({m1.member_id: b"a1"})).assignment == b"a1"
    m2 = await Member.connect(port)
    first = await m2.receive_join(await m2.send_join())
    assert first.error_code == E.MEMBER_ID_REQUIRED
    m2.member_id = first.member_id
    pending = await m2.send_join()
    await until(lambda: group_state(cluster) == "PreparingRebalance")
    assert await m1.heartbeat() == E.REBALANCE_IN_PROGRESS
    r1 = await m1.join()
    r2 = await m2.receive_join(pending)
    assert (r1.error_code, r2.error_code) == (0, 0)
    assert r1.generation_id == r2.generation_id == 2
    follower_sync = await m2.send_sync()
    await m1.sync({m1.member_id: b"a1", m2.member_id: b"a2"})
    assert (await m2.client.receive(14, 3, follower_sync)).assignment == b"a2"
    assert group_state(cluster) == "Stable"
    return m1, m2


def test_partition_for_uses_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Kafka's Utils.abs maps it to 0
    assert kafka_abs(java_string_hash("polygenelubricants")) == 0
    assert kafka_abs(java_string_hash("group-é")) == abs(java_string_hash("group-é"))


async def test_find_coordinator_single_and_batched(cluster, port):
    client = await RawClient.connect(port)
    single = await client.request(FIND_COORDINATOR, 2, {"key": "g", "key_type": 0})
    assert (single.error_code, single.node_id, single.port) == (0, 0, port)
    batched = await client.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c.key, c.error_code, c.node_id) for c in batched.coordinators] == [("a", 0, 0), ("b", 0, 0)]
    txn = await client.request(FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
    assert txn.error_code == E.COORDINATOR_NOT_AVAILABLE  # it creates __transaction_state first
    unknown = await client.request(FIND_COORDINATOR, 3, {"key": "tx", "key_type": 2})
    assert unknown.error_code == E.INVALID_REQUEST
    metadata = await client.request(3, 12, {"topics": [{"name": "__consumer_offsets"}]})
    assert metadata.topics[0].is_internal
    await client.close()


async def test_first_member_needs_a_member_id_then_leads_and_syncs(cluster, port):
    m = await Member.connect(port)
    first = await m.receive_join(await m.send_join())
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id.startswith("raw-test-")
    assert group_state(cluster) == "Empty"  # a pending member is not a member yet
    m.member_id = first.member_id
    joined = await m.receive_join(await m.send_join())
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, m.member_id)
    assert [(x.member_id, x.metadata) for x in joined.members] == [(m.member_id, b"sub")]
    assert joined.protocol_name == "range"
    assert group_state(cluster) == "CompletingRebalance"
    assert await m.heartbeat() == E.NONE
    synced = await m.sync({m.member_id: b"assigned"})
    assert (synced.error_code, synced.assignment) == (0, b"assigned")
    assert group_state(cluster) == "Stable"
    again = await m.sync()  # a repeated sync in Stable returns the stored assignment
    assert again.assignment == b"assigned"
    await m.close()


async def test_v3_join_is_accepted_without_member_id_round_trip(cluster, port):
    m = await Member.connect(port, version=3)
    joined = await m.receive_join(await m.send_join())
    assert joined.error_code == 0 and joined.member_id and joined.generation_id == 1
    await m.close()


async def test_second_member_rebalances_and_leader_assigns(cluster, port):
    m1, m2 = await stable_pair(cluster, port)
    group = cluster.brokers[0].group_coordinator.group("g")
    assert group.leader_id == m1.member_id and group.generation_id == 2
    assert await m2.heartbeat() == E.NONE
    # A follower rejoining with unchanged metadata in Stable just gets the current generation.
    again = await m2.join()
    assert (again.error_code, again.generation_id, list(again.members)) == (0, 2, [])
    for m in (m1, m2):
        await m.close()


async def test_errors_clients_rely_on(cluster, port):
    m1, m2 = await stable_pair(cluster, port)
    assert await m1.heartbeat(member_id="nobody") == E.UNKNOWN_MEMBER_ID
    assert await m1.heartbeat(generation=1) == E.ILLEGAL_GENERATION
    m1.generation = 1
    assert (await m1.sync()).error_code == E.ILLEGAL_GENERATION
    m1.generation = 2
    other = await Member.connect(port, protocols=(("roundrobin", b"x"),))
    assert (await other.join()).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = await other.client.request(JOIN, 5, join_body(protocol_type="connect"))
    assert wrong_type.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    too_short = await other.client.request(JOIN, 5, join_body(session=10))
    assert too_short.error_code == E.INVALID_SESSION_TIMEOUT
    no_group = await other.client.request(JOIN, 5, join_body(group=""))
    assert no_group.error_code == E.INVALID_GROUP_ID
    unknown = await other.client.request(JOIN, 5, join_body("stale-id", group="fresh"))
    assert unknown.error_code == E.UNKNOWN_MEMBER_ID
    # The leader rejoining forces a rebalance; until m2 rejoins, sync and commit are refused.
    pending = await m1.send_join()
    await until(lambda: group_state(cluster) == "PreparingRebalance")
    assert (await m2.sync()).error_code == E.REBALANCE_IN_PROGRESS
    assert await m2.heartbeat() == E.REBALANCE_IN_PROGRESS
    await m2.join()
    await m1.receive_join(pending)
    assert group_state(cluster) == "CompletingRebalance"
    assert set((await m2.commit({("t", 0): 1})).values()) == {E.REBALANCE_IN_PROGRESS}
    assert set((await other.commit({("t", 0): 1})).values()) == {E.UNKNOWN_MEMBER_ID}
    for m in (m1, m2, other):
        await m.close()


async def test_session_expiry_removes_a_silent_member(cluster, port):
    m1, m2 = await stable_pair(cluster, port)
    await advance(cluster, SESSION_MS * 6 // 10)
    assert await m1.heartbeat() == E.NONE
    await advance(cluster, SESSION_MS * 6 // 10)  # m2 is now silent for more than its session
    await until(lambda: group_state(cluster) == "PreparingRebalance")
    assert await m1.heartbeat() == E.REBALANCE_IN_PROGRESS
    rejoined = await m1.join()
    assert (rejoined.generation_id, [x.member_id for x in rejoined.members]) == (3, [m1.member_id])
    assert await m2.heartbeat() == E.UNKNOWN_MEMBER_ID
    for m in (m1, m2):
        await m.close()


async def test_rebalance_timeout_drops_members_that_do_not_rejoin(cluster, port):
    m1, m2 = await stable_pair(cluster, port)
    m3 = await Member.connect(port, version=3)
    pending3 = await m3.send_join()
    await until(lambda: group_state(cluster) == "PreparingRebalance")
    pending1 = await m1.send_join()
    await asyncio.sleep(0.05)
    # m2 keeps heartbeating (so its session lives) but never rejoins.
    for _ in range(REBALANCE_MS // 500):
        assert await m2.heartbeat() == E.REBALANCE_IN_PROGRESS
        await advance(cluster, 500)
    r1, r3 = await m1.receive_join(pending1), await m3.receive_join(pending3)
    assert r1.generation_id == r3.generation_id == 3
    assert {x.member_id for x in r1.members} == {m1.member_id, m3.member_id}
    assert await m2.heartbeat() == E.UNKNOWN_MEMBER_ID
    for m in (m1, m2, m3):
        await m.close()


async def test_initial_rebalance_delay_waits_for_more_members(cluster, port):
    cluster.brokers[0].config.values["group.initial.rebalance.delay.ms"] = 300
    m1, m2 = await Member.connect(port, version=3), await Member.connect(port, version=3)
    p1 = await m1.send_join()
    await until(lambda: group_state(cluster) == "PreparingRebalance")
    await advance(cluster, 200)
    p2 = await m2.send_join()  # arrives within the delay: the delay starts over once
    await until(lambda: len(cluster.brokers[0].group_coordinator.group("g").members) == 2)
    await advance(cluster, 150)
    assert group_state(cluster) == "PreparingRebalance"
    await advance(cluster, 300)
    r1, r2 = await m1.receive_join(p1), await m2.receive_join(p2)
    assert r1.generation_id == r2.generation_id == 1
    assert len(r1.members) + len(r2.members) == 2  # the leader saw both
    for m in (m1, m2):
        await m.close()


async def test_static_member_rejoin_fences_its_old_id_without_rebalance(cluster, port):
    m = await Member.connect(port, instance="i-1")
    joined = await m.join()
    assert joined.error_code == 0 and joined.generation_id == 1  # static: no MEMBER_ID_REQUIRED
    await m.sync({m.member_id: b"mine"})
    old_id = m.member_id
    restarted = await Member.connect(port, instance="i-1")
    again = await restarted.join()
    assert again.error_code == 0 and again.member_id != old_id
    assert (again.generation_id, again.leader) == (1, old_id)  # no rebalance, no re-assignment
    assert group_state(cluster) == "Stable"
    assert (await restarted.sync()).assignment == b"mine"
    assert await m.heartbeat() == E.FENCED_INSTANCE_ID
    assert await restarted.heartbeat() == E.NONE
    for x in (m, restarted):
        await x.close()


async def test_leave_group_single_and_batched(cluster, port):
    m1, m2 = await stable_pair(cluster, port)
    v0 = await m2.client.request(LEAVE, 0, {"group_id": "g", "member_id": m2.member_id})
    assert v0.error_code == 0
    await until(lambda: group_state(cluster) == "PreparingRebalance")
    await m1.join()
    batched = await m1.client.request(LEAVE, 5, {"group_id": "g", "members": [
        {"member_id": m1.member_id}, {"member_id": "ghost"}]})
    assert [x.error_code for x in batched.members] == [0, E.UNKNOWN_MEMBER_ID]
    group = cluster.brokers[0].group_coordinator.group("g")
    assert (group.state.value, group.generation_id, group.members) == ("Empty", 4, {})
    for m in (m1, m2):
        await m.close()


def test_protocol_selection_by_votes():
    group = GroupMetadata("g")

    def member(name: str, protocols: list[str]) -> MemberMetadata:
        return MemberMetadata(name, None, "c", "h", 1, 1, "consumer", [(p, b"") for p in protocols])

    group.add(member("a", ["range", "sticky", "roundrobin"]))
    group.add(member("b", ["sticky", "roundrobin"]))
    group.add(member("c", ["roundrobin", "sticky"]))
    assert group.candidate_protocols() == {"roundrobin", "sticky"}
    assert group.select_protocol() == "sticky"  # votes: a sticky, b sticky, c roundrobin
    group.transition_to(GroupState.PREPARING_REBALANCE, 0)  # an Empty group accepts anything
    assert not group.supports_protocols("consumer", {"range"})
    assert not group.supports_protocols("connect", {"sticky"})
    assert group.supports_protocols("consumer", {"range", "sticky"})
