"""TransactionMarkerChannel: markers grouped per leader, retried after NOT_LEADER_OR_FOLLOWER or an
unreachable broker (to the leader the metadata cache names by then), dropped for a deleted topic or
a refusal, given up when the coordinator no longer owns the transaction. The transport here is a
table of scripted leader answers (the leaders' side has its own tests)."""

from __future__ import annotations

import uuid

from broker.coordinator.transaction.transaction_marker_channel import (
    TransactionMarkerChannel,
    TxnMarker,
)
from broker.metadata.metadata_cache import MetadataCache, MetadataSnapshot, TopicInfo
from broker.metadata.partition_state import LeaderAndIsr
from protocol.errors import ErrorCode
from protocol.transaction_records import ControlType
from timer import ManualClock, SystemTimer


def cache_with(leaders: dict[tuple[str, int], int]) -> MetadataCache:
    cache = MetadataCache(SystemTimer(ManualClock()))
    topics: dict[str, dict[int, list[int]]] = {}
    for (topic, p), _ in leaders.items():
        topics.setdefault(topic, {})[p] = [0, 1, 2]
    cache.update(MetadataSnapshot(0, 1, {b: ("127.0.0.1", 9092 + b) for b in range(3)},
                                  {t: TopicInfo(t, uuid.uuid4(), a) for t, a in topics.items()},
                                  {k: LeaderAndIsr(*k, leader, 0, [0, 1, 2], [0, 1, 2])
                                   for k, leader in leaders.items()}))
    return cache


class ScriptedLeaders:
    """Answers per (broker, partition), consumed in order; afterwards NONE."""

    def __init__(self, script: dict[tuple[int, tuple[str, int]], list[ErrorCode | None]]):
        self.script = script
        self.calls: list[tuple[int, frozenset]] = []
        self.requests: list[tuple[int, int]] = []  # (broker, markers in the request)
        self.on_call = None

    async def write_txn_markers(self, broker_id: int, markers: list[TxnMarker]):
        self.requests.append((broker_id, len(markers)))
        out = []
        for marker in markers:
            self.calls.append((broker_id, marker.partitions))
            if self.on_call is not None:
                self.on_call(len(self.calls))
            answers = {}
            for tp in marker.partitions:
                queue = self.script.get((broker_id, tp), [])
                answer = queue.pop(0) if queue else ErrorCode.NONE
                if answer is None:
                    raise ConnectionError(f"broker {broker_id} unreachable")
                answers[tp] = answer
            out.append(answers)
        return out


def marker(*partitions: tuple[str, int]) -> TxnMarker:
    return TxnMarker(7, 1, ControlType.COMMIT, 3, frozenset(partitions))


async def test_grouped_per_leader_and_retried_to_the_new_leader():
    cache = cache_with({("a", 0): 0, ("a", 1): 1, ("b", 0): 1})
    leaders = ScriptedLeaders({(0, ("a", 0)): [ErrorCode.NOT_LEADER_OR_FOLLOWER]})

    def leadership_moves(calls: int) -> None:
        if calls == 2:  # after the first round: the controller moved a-0 to broker 2
            cache.snapshot.partitions[("a", 0)].leader = 2

    leaders.on_call = leadership_moves
    assert await TransactionMarkerChannel(leaders, cache).send(
        marker(("a", 0), ("a", 1), ("b", 0)), lambda: True)
    first_round = sorted(leaders.calls[:2])
    assert first_round == [(0, frozenset({("a", 0)})), (1, frozenset({("a", 1), ("b", 0)}))]
    assert leaders.calls[2:] == [(2, frozenset({("a", 0)}))]


async def test_unreachable_leaders_are_retried_and_deleted_topics_dropped():
    cache = cache_with({("a", 0): 0, ("gone", 0): 1})
    leaders = ScriptedLeaders({(0, ("a", 0)): [None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]})

    def topic_deleted(calls: int) -> None:
        cache.snapshot.topics.pop("gone", None)
        cache.snapshot.partitions.pop(("gone", 0), None)

    leaders.script[(1, ("gone", 0))] = [None]
    leaders.on_call = topic_deleted
    assert await TransactionMarkerChannel(leaders, cache).send(
        marker(("a", 0), ("gone", 0)), lambda: True)
    assert [c for c in leaders.calls if c[0] == 0] == [(0, frozenset({("a", 0)}))] * 3
    assert [c for c in leaders.calls if c[0] == 1] == [(1, frozenset({("gone", 0)}))]


async def test_gives_up_once_the_transaction_is_no_longer_ours():
    cache = cache_with({("a", 0): 0})
    leaders = ScriptedLeaders({(0, ("a", 0)): [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 100})
    ours = [True]
    leaders.on_call = lambda calls: ours.__setitem__(0, calls < 3)
    assert not await TransactionMarkerChannel(leaders, cache).send(marker(("a", 0)),
                                                                   lambda: ours[0])
    assert len(leaders.calls) == 3


async def test_a_refusal_is_not_retried():
    cache = cache_with({("a", 0): 0})
    leaders = ScriptedLeaders({(0, ("a", 0)): [ErrorCode.TRANSACTION_COORDINATOR_FENCED]})
    assert await TransactionMarkerChannel(leaders, cache).send(marker(("a", 0)), lambda: True)
    assert len(leaders.calls) == 1


async def test_transactions_ending_together_share_one_request_per_broker():
    import asyncio

    cache = cache_with({("a", 0): 0, ("a", 1): 1})
    leaders = ScriptedLeaders({})
    channel = TransactionMarkerChannel(leaders, cache)
    other = TxnMarker(8, 0, ControlType.ABORT, 3, frozenset({("a", 0), ("a", 1)}))
    assert await asyncio.gather(channel.send(marker(("a", 0), ("a", 1)), lambda: True),
                                channel.send(other, lambda: True)) == [True, True]
    assert sorted(leaders.requests) == [(0, 2), (1, 2)]
