"""KIP-848 server-side assignors, member reconciliation and the groups' records, without a
broker."""

from __future__ import annotations

import uuid

from broker.coordinator.group.assignors import range_, uniform
from broker.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    replay_consumer_group_record,
    topic_regex,
)
from protocol import group_records as gr


def flat(assignment: dict[str, dict[str, set[int]]]) -> dict[str, list[tuple[str, int]]]:
    return {m: sorted((t, p) for t, ps in topics.items() for p in ps)
            for m, topics in assignment.items()}


def test_uniform_is_balanced_and_keeps_partitions_where_they_were() -> None:
    subs = {"a": {"t"}, "b": {"t"}, "c": {"t"}}
    first = uniform(subs, {"t": 7}, {})
    assert sorted(len(v) for v in flat(first).values()) == [2, 2, 3]
    # c leaves: a and b keep all they had and share c's.
    second = uniform({"a": {"t"}, "b": {"t"}}, {"t": 7}, first)
    for m in ("a", "b"):
        assert set(flat(first)[m]) <= set(flat(second)[m])
    assert sorted(len(v) for v in flat(second).values()) == [3, 4]
    # Only subscribers get a topic's partitions.
    mixed = uniform({"a": {"t"}, "b": {"u"}}, {"t": 2, "u": 1}, {})
    assert flat(mixed) == {"a": [("t", 0), ("t", 1)], "b": [("u", 0)]}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    target = range_({"b": {"t"}, "a": {"t", "u"}}, {"t": 5, "u": 2}, {})
    assert flat(target) == {"a": [("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)],
                            "b": [("t", 3), ("t", 4)]}


def member(member_id: str) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id, "client", "/127.0.0.1", 300_000, {"t"},
                               subscribed_topics={"t"})


def test_reconciliation_revokes_first_and_waits_for_released_partitions() -> None:
    group = ConsumerGroup("g")
    a = group.members["a"] = member("a")
    group.bump()
    group.compute_target({"t": 2}, "uniform")
    assert group.reconcile(a, {}) and (a.member_epoch, a.assigned) == (1, {"t": {0, 1}})
    b = group.members["b"] = member("b")
    group.bump()
    group.compute_target({"t": 2}, "uniform")
    assert group.reconcile(b, {})  # its epoch moves, its partition is still a's
    assert (b.member_epoch, b.assigned, b.state) == (2, {}, MemberState.UNRELEASED_PARTITIONS)
    assert group.reconcile(a, {"t": {0, 1}})
    assert (a.member_epoch, a.assigned, a.revoking) == (1, {"t": {0}}, {"t": {1}})
    assert not group.reconcile(a, {"t": {0, 1}})  # not revoked yet: nothing moves
    assert not group.reconcile(b, None)
    assert group.reconcile(a, {"t": {0}}) and (a.member_epoch, a.state) == (2, MemberState.STABLE)
    assert group.reconcile(b, None) and b.assigned == {"t": {1}} and group.state == "Stable"


def test_a_regex_subscribes_the_topics_it_matches_in_full() -> None:
    group = ConsumerGroup("g")
    m = group.members["m"] = ConsumerGroupMember("m", "c", "/h", 1, {"named"},
                                                 topic_regex("orders-.*"))
    assert group.resolve_subscriptions({"named", "orders-eu", "orders", "x-orders-us"})
    assert m.subscribed_topics == {"named", "orders-eu"}
    assert not group.resolve_subscriptions({"named", "orders-eu"})
    assert group.resolve_subscriptions({"named", "orders-eu", "orders-us"})  # one more matches


def test_the_records_replay_to_the_group_they_describe() -> None:
    """Kafka 4's record types 3, 5-8 (flexible values) round-trip, and tombstones remove what
    they name: a member's records, or the whole group."""
    tid = uuid.uuid4().bytes
    key, value = gr.consumer_group_key, gr.consumer_group_value
    records = [
        (key(gr.CONSUMER_GROUP_MEMBER_METADATA, "g", "m"), value(
            gr.CONSUMER_GROUP_MEMBER_METADATA, {
                "instance_id": "i", "rack_id": None, "client_id": "c", "client_host": "/h",
                "subscribed_topic_names": ["t"], "subscribed_topic_regex": "t-.*",
                "rebalance_timeout_ms": 300_000, "server_assignor": "range"})),
        (key(gr.CONSUMER_GROUP_METADATA, "g"), value(gr.CONSUMER_GROUP_METADATA, {"epoch": 4})),
        (key(gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, "g", "m"), value(
            gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
            {"topic_partitions": [{"topic_id": tid, "partitions": [0, 2]}]})),
        (key(gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, "g"), value(
            gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, {"assignment_epoch": 4})),
        (key(gr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m"), value(
            gr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {
                "member_epoch": 4, "previous_member_epoch": 3, "state": 1,
                "assigned_partitions": [{"topic_id": tid, "partitions": [0]}],
                "partitions_pending_revocation": [{"topic_id": tid, "partitions": [1]}]})),
        (key(gr.CONSUMER_GROUP_METADATA, "gone"), value(gr.CONSUMER_GROUP_METADATA, {"epoch": 1})),
        (key(gr.CONSUMER_GROUP_MEMBER_METADATA, "gone", "x"), None),
        (key(gr.CONSUMER_GROUP_METADATA, "gone"), None),
    ]
    loaded: dict = {}
    for k, v in records:
        replay_consumer_group_record(gr.decode_record(k, v), loaded)
    assert list(loaded) == ["g"]
    g = loaded["g"]
    assert (g.epoch, g.assignment_epoch) == (4, 4)
    assert (g.members["m"].instance_id, g.members["m"].subscribed_topic_regex,
            list(g.members["m"].subscribed_topic_names)) == ("i", "t-.*", ["t"])
    assert [(bytes(tp.topic_id), list(tp.partitions)) for tp in g.targets["m"].topic_partitions] \
        == [(tid, [0, 2])]
    current = g.current["m"]
    assert (current.member_epoch, current.previous_member_epoch, current.state) == (4, 3, 1)
    assert [list(tp.partitions) for tp in current.partitions_pending_revocation] == [[1]]
    replay_consumer_group_record(gr.decode_record(
        key(gr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m"), None), loaded)
    assert "m" not in loaded["g"].current
