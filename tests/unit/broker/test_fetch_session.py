"""The fetch session cache and contexts (KIP-227) and the fetcher's session handler, without I/O."""

from __future__ import annotations

import random
from collections import OrderedDict

from broker.replication.delayed_fetch import FetchPartition, FetchPartitionData
from broker.replication.fetch_session import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    ChangedPartitions,
    FetchManager,
    FetchMetadata,
    FetchSessionCache,
    SessionWatch,
    next_epoch,
)
from broker.replication.fetch_session_handler import FetchSessionHandler, FetchSessionResponse
from protocol.errors import ErrorCode


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def fp(partition: int, offset: int = 0, topic: str = "t") -> FetchPartition:
    return FetchPartition(topic, partition, offset, 1024)


def data(hw: int = 0, records: bytes = b"", error: ErrorCode = ErrorCode.NONE) -> FetchPartitionData:
    return FetchPartitionData(error, hw, hw, 0, records)


def manager(slots: int = 10) -> tuple[FetchManager, Clock]:
    clock = Clock()
    return FetchManager(FetchSessionCache(slots, clock, rng=random.Random(7))), clock


def open_session(mgr: FetchManager, partitions: list[FetchPartition], *, follower: bool = False,
                 hw: int = 0) -> int:
    ctx = mgr.new_context(FetchMetadata(0, INITIAL_EPOCH), partitions, [], is_follower=follower)
    assert ctx.kind == "full"
    answered = ctx.respond([data(hw) for _ in ctx.partitions])
    assert len(answered) == len(partitions)
    return ctx.session_id


def cached(n: int) -> OrderedDict:
    return OrderedDict((("t", i), CachedPartition.of(fp(i))) for i in range(n))


def test_epochs_wrap_and_final_stays_final():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_opens_a_session_and_incremental_answers_only_what_changed():
    mgr, _ = manager()
    session_id = open_session(mgr, [fp(0), fp(1), fp(2)], hw=5)
    assert session_id != INVALID_SESSION_ID and mgr.cache.stats()["partitions"] == 3

    # Nothing named and nothing changed: nothing to read, nothing to answer.
    ctx = mgr.new_context(FetchMetadata(session_id, 1), [], [], is_follower=False)
    assert ctx.kind == "incremental" and ctx.partitions == [] and ctx.respond([]) == []
    # Every partition read (widened, as for a parked wait): only the changed ones are answered.
    ctx = mgr.new_context(FetchMetadata(session_id, 2), [], [], is_follower=False)
    assert [(p.partition, p.fetch_offset) for p in ctx.widen()] == [(0, 0), (1, 0), (2, 0)]
    answered = ctx.respond([data(5), data(6), data(5, b"rec")])
    assert [p.partition for p, _ in answered] == [1, 2]
    assert ctx.session_id == session_id
    # Partition 2 returned records: it is read last next time (Kafka's fairness rotation).
    assert list(mgr.cache.get(session_id).partitions) == [("t", 0), ("t", 1), ("t", 2)]
    mgr.changes.mark(("t", 1))
    ctx = mgr.new_context(FetchMetadata(session_id, 3), [fp(2, 9)], [("t", 0)], is_follower=False)
    assert [(p.partition, p.fetch_offset) for p in ctx.partitions] == [(1, 0), (2, 9)]
    assert ctx.respond([data(6), data(5)]) == []  # same HW/LSO/log start and no records


def test_a_consumer_session_reads_only_named_changed_and_pending_partitions():
    """A partition is read when the fetch names it, when it changed since the session's last
    read, or when its last read left records to hand out or an error."""
    mgr, _ = manager()
    session_id = open_session(mgr, [fp(i) for i in range(10)], hw=5)
    for name_key in (("t", 7), ("other", 0), ("t", 3)):
        mgr.changes.mark(name_key)  # another topic's change is not this session's
    ctx = mgr.new_context(FetchMetadata(session_id, 1), [fp(5, 5)], [], is_follower=False)
    assert [p.partition for p in ctx.partitions] == [3, 5, 7]  # in the session's order
    below_end = FetchPartitionData(ErrorCode.NONE, 5, 5, 0, b"", end_offset=9)
    ctx.respond([data(5), below_end, data(5)])  # 5 is read up to 5 of 9: records remain
    ctx = mgr.new_context(FetchMetadata(session_id, 2), [], [], is_follower=False)
    assert [p.partition for p in ctx.partitions] == [5]
    ctx.respond([data(5, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)])
    ctx = mgr.new_context(FetchMetadata(session_id, 3), [], [], is_follower=False)
    assert [p.partition for p in ctx.partitions] == [5]  # an error is looked at again
    ctx.respond([data(5)])
    ctx = mgr.new_context(FetchMetadata(session_id, 4), [], [], is_follower=False)
    assert ctx.partitions == []
    follower = open_session(mgr, [fp(i) for i in range(10)], follower=True)
    mgr.changes.mark(("t", 8))
    ctx = mgr.new_context(FetchMetadata(follower, 1), [], [], is_follower=True)
    assert [p.partition for p in ctx.partitions] == [8]  # a follower's session alike


def test_a_session_behind_the_forgotten_changes_reads_everything():
    mgr = FetchManager(FetchSessionCache(10, Clock(), rng=random.Random(7)),
                       ChangedPartitions(max_entries=2))
    session_id = open_session(mgr, [fp(i) for i in range(10)])
    for i in range(3):  # the first change is dropped: the session cannot know what it missed
        mgr.changes.mark(("t", i))
    ctx = mgr.new_context(FetchMetadata(session_id, 1), [], [], is_follower=False)
    assert len(ctx.partitions) == 10
    ctx.respond([data()] * 10)
    mgr.changes.mark(("t", 4))
    ctx = mgr.new_context(FetchMetadata(session_id, 2), [], [], is_follower=False)
    assert [p.partition for p in ctx.partitions] == [4]


def test_an_erred_partition_is_answered_again_once_the_error_clears():
    mgr, _ = manager()
    session_id = open_session(mgr, [fp(0)], hw=5)
    mgr.changes.mark(("t", 0))  # it lost its leader
    ctx = mgr.new_context(FetchMetadata(session_id, 1), [], [], is_follower=False)
    assert len(ctx.respond([data(5, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)])) == 1
    ctx = mgr.new_context(FetchMetadata(session_id, 2), [], [], is_follower=False)
    assert len(ctx.respond([data(5)])) == 1  # same HW as before the error, yet answered


def test_session_errors_and_closing():
    mgr, _ = manager()
    session_id = open_session(mgr, [fp(0)])
    unknown = mgr.new_context(FetchMetadata(session_id + 1, 1), [], [], is_follower=False)
    assert (unknown.kind, unknown.error) == ("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    stale = mgr.new_context(FetchMetadata(session_id, 2), [], [], is_follower=False)
    assert (stale.kind, stale.error) == ("error", ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    assert stale.respond([]) == [] and stale.session_id == INVALID_SESSION_ID
    # A wrong epoch does not move the session: the right one still works.
    assert mgr.new_context(FetchMetadata(session_id, 1), [], [], is_follower=False).kind == \
        "incremental"
    closing = mgr.new_context(FetchMetadata(session_id, FINAL_EPOCH), [fp(0)], [],
                              is_follower=False)
    assert closing.kind == "sessionless" and mgr.cache.get(session_id) is None
    closing.respond([data()])
    assert closing.session_id == INVALID_SESSION_ID and mgr.cache.stats()["sessions"] == 0


def test_a_full_fetch_naming_a_session_replaces_it_and_forgetting_all_closes_it():
    mgr, _ = manager()
    first = open_session(mgr, [fp(0)])
    ctx = mgr.new_context(FetchMetadata(first, INITIAL_EPOCH), [fp(0), fp(1)], [],
                          is_follower=False)
    ctx.respond([data(), data()])
    assert mgr.cache.get(first) is None and set(mgr.cache.sessions) == {ctx.session_id}
    emptied = mgr.new_context(FetchMetadata(ctx.session_id, 1), [], [("t", 0), ("t", 1)],
                              is_follower=False)
    assert emptied.kind == "sessionless" and mgr.cache.stats() == {
        "sessions": 0, "privileged": 0, "partitions": 0, "evictions": 0, "slots": 10}


def test_the_cache_knows_the_sessions_holding_each_partition():
    """What a change to a partition wakes: the sessions holding it, kept as partitions come and
    go and sessions close (a narrowed fetch then waits under its session's one key)."""
    mgr, _ = manager()
    a = open_session(mgr, [fp(0), fp(1)])
    b = open_session(mgr, [fp(1), fp(2, topic="u")])
    assert mgr.cache.sessions_of == {("t", 0): {a}, ("t", 1): {a, b}, ("u", 2): {b}}
    ctx = mgr.new_context(FetchMetadata(a, 1), [fp(3)], [("t", 0)], is_follower=False)
    assert ctx.kind == "incremental" and ctx.session_watch() == SessionWatch(a)
    assert ctx.session_watch() != ("t", a)  # never a partition's key
    assert mgr.cache.sessions_of == {("t", 1): {a, b}, ("t", 3): {a}, ("u", 2): {b}}
    mgr.new_context(FetchMetadata(b, FINAL_EPOCH), [], [], is_follower=False)
    assert mgr.cache.sessions_of == {("t", 1): {a}, ("t", 3): {a}}
    replaced = mgr.new_context(FetchMetadata(a, INITIAL_EPOCH), [fp(5)], [], is_follower=False)
    replaced.respond([data()])
    assert mgr.cache.sessions_of == {("t", 5): {replaced.session_id}}


def test_a_full_cache_answers_sessionless_and_zero_slots_disable_sessions():
    mgr, _ = manager(slots=0)
    ctx = mgr.new_context(FetchMetadata(0, INITIAL_EPOCH), [fp(0)], [], is_follower=True)
    assert len(ctx.respond([data()])) == 1 and ctx.session_id == INVALID_SESSION_ID


def test_eviction_follows_kafkas_rules():
    clock = Clock()
    cache = FetchSessionCache(2, clock, rng=random.Random(1))
    small = cache.maybe_create_session(False, cached(1))
    big = cache.maybe_create_session(False, cached(5))
    # Full, both young: a consumer's session cannot take a slot, whatever its size.
    assert cache.maybe_create_session(False, cached(100)) == INVALID_SESSION_ID
    # A follower's may: it evicts the smallest consumer session.
    follower = cache.maybe_create_session(True, cached(1))
    assert follower and cache.get(small) is None and cache.get(big) is not None
    # Another follower's: only consumer sessions are evictable by it while followers' are young.
    follower2 = cache.maybe_create_session(True, cached(1))
    assert follower2 and cache.get(big) is None
    assert cache.maybe_create_session(True, cached(1)) == INVALID_SESSION_ID
    # Older than EVICTION_MS since creation (and touched since), a follower's session is evictable
    # by any bigger session, but not by an equal or smaller consumer one.
    clock.now += EVICTION_MS + 1
    cache.touch(cache.get(follower), clock.now)
    cache.touch(cache.get(follower2), clock.now)
    assert cache.maybe_create_session(False, cached(1)) == INVALID_SESSION_ID
    bigger = cache.maybe_create_session(True, cached(3))
    assert bigger and len(cache.sessions) == 2 and cache.evictions == 3
    # Unused for longer than EVICTION_MS: the least recently used goes first, for anyone.
    clock.now += EVICTION_MS + 1
    cache.touch(cache.get(bigger), clock.now)
    clock.now += EVICTION_MS + 1
    survivor = next(s for s in cache.sessions if s != bigger)
    assert cache.maybe_create_session(False, cached(1))
    assert cache.get(survivor) is None and cache.get(bigger) is not None


def test_touch_counts_partitions_once():
    clock = Clock()
    cache = FetchSessionCache(5, clock)
    sid = cache.maybe_create_session(False, cached(3))
    session = cache.get(sid)
    session.partitions.popitem()
    cache.touch(session, clock.now)
    cache.touch(session, clock.now)
    assert cache.num_partitions == 2
    cache.remove(sid)
    assert cache.num_partitions == 0


def test_handler_sends_only_changes_and_forgets_removed_partitions():
    handler = FetchSessionHandler()
    first = handler.build([fp(0), fp(1), fp(2)])
    assert first.metadata == FetchMetadata(0, INITIAL_EPOCH) and len(first.to_send) == 3
    assert handler.handle_response(FetchSessionResponse(ErrorCode.NONE, 42))
    nothing = handler.build([fp(0), fp(1), fp(2)])
    assert nothing.metadata == FetchMetadata(42, 1) and nothing.to_send == [] == nothing.to_forget
    assert handler.handle_response(FetchSessionResponse(ErrorCode.NONE, 42))
    moved = handler.build([fp(0, 7), fp(2)])
    assert moved.metadata == FetchMetadata(42, 2)
    assert moved.to_send == [fp(0, 7)] and moved.to_forget == [("t", 1)]
    # A wrong epoch: the next is a full fetch closing session 42; an unknown id: a fresh full one.
    assert not handler.handle_response(
        FetchSessionResponse(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0))
    assert handler.build([fp(0)]).metadata == FetchMetadata(42, INITIAL_EPOCH)
    assert not handler.handle_response(FetchSessionResponse(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0))
    assert handler.build([fp(0)]).metadata == FetchMetadata(0, INITIAL_EPOCH)
    # No slot at the leader: full fetches every time.
    assert handler.handle_response(FetchSessionResponse(ErrorCode.NONE, INVALID_SESSION_ID))
    again = handler.build([fp(0)])
    assert again.metadata == FetchMetadata(0, INITIAL_EPOCH) and again.to_send == [fp(0)]


def test_handler_built_from_changes_compares_only_those():
    """A fetcher that knows what changed builds from it: the other partitions are neither
    compared nor named, and the session follows what each request sent."""
    handler = FetchSessionHandler()
    wanted = {("t", i): fp(i) for i in range(1000)}
    full = handler.build_from(wanted, [])  # a full request names all, whatever changed
    assert len(full.to_send) == 1000
    assert handler.handle_response(FetchSessionResponse(ErrorCode.NONE, 42))
    wanted[("t", 3)] = fp(3, 9)
    del wanted[("t", 5)]
    wanted[("t", 1000)] = fp(1000)
    request = handler.build_from(wanted, [("t", 3), ("t", 5), ("t", 1000), ("t", 8), ("x", 0)])
    assert request.metadata == FetchMetadata(42, 1)
    assert request.to_send == [fp(3, 9), fp(1000)] and request.to_forget == [("t", 5)]
    assert handler.handle_response(FetchSessionResponse(ErrorCode.NONE, 42))
    assert handler.session_partitions[("t", 3)] == fp(3, 9) and ("t", 5) not in \
        handler.session_partitions and len(handler.session_partitions) == 1000
    # Sent already: the same request again names nothing.
    assert handler.build_from(wanted, [("t", 3)]).to_send == []
    handler.handle_error()  # the next request is full again
    assert len(handler.build_from(wanted, []).to_send) == 1000


def test_handler_against_the_manager_round_trips():
    mgr, _ = manager()
    handler = FetchSessionHandler()
    wanted = [fp(i) for i in range(100)]
    for round_ in range(3):
        if round_ == 2:
            mgr.changes.mark(("t", 7))  # its high watermark moves
        request = handler.build(wanted)
        ctx = mgr.new_context(request.metadata, request.to_send, request.to_forget,
                              is_follower=True)
        answered = ctx.respond([data(hw=1 if p.partition == 7 and round_ == 2 else 0)
                                for p in ctx.partitions])
        assert handler.handle_response(FetchSessionResponse(
            ErrorCode.NONE, ctx.session_id, {(p.topic, p.partition): d for p, d in answered}))
        assert len(request.to_send) == (100 if round_ == 0 else 0)
        assert len(answered) == {0: 100, 1: 0, 2: 1}[round_]
    assert mgr.cache.stats()["privileged"] == 1


def test_cached_partitions_are_bounded_across_sessions():
    """A full fetch that would take the cache past its partition bound goes on sessionless; an
    incremental one that would grow its session past it closes the session (the client starts
    over with a full fetch). Below the bound both work as usual."""
    clock = Clock()
    mgr = FetchManager(FetchSessionCache(10, clock, rng=random.Random(7), max_partitions=5))
    first = open_session(mgr, [fp(i) for i in range(3)])
    too_big = mgr.new_context(FetchMetadata(0, INITIAL_EPOCH), [fp(i, topic="u") for i in range(3)],
                              [], is_follower=True)
    assert len(too_big.respond([data()] * 3)) == 3  # answered in full...
    assert too_big.session_id == INVALID_SESSION_ID  # ...without a session
    grow = mgr.new_context(FetchMetadata(first, 1), [fp(3), fp(4)], [], is_follower=False)
    assert grow.kind == "incremental" and mgr.cache.stats()["partitions"] == 5
    assert [p.partition for p in grow.partitions] == [3, 4]  # the idle others are not read
    grow.respond([data()] * 2)
    past = mgr.new_context(FetchMetadata(first, 2), [fp(5)], [], is_follower=False)
    assert (past.kind, past.error) == ("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    assert mgr.cache.get(first) is None and mgr.cache.stats()["partitions"] == 0


def test_session_ids_follow_the_seeded_module_generator():
    """Random as in Kafka, yet `kafka-sim simulate` (which seeds `random`) gets the same ids
    each run: the order parked fetches of several sessions wake in follows them."""
    def first_ids() -> list[int]:
        cache = FetchSessionCache(3, Clock())
        return [cache.maybe_create_session(True, cached(1)) for _ in range(3)]

    state = random.getstate()
    try:
        random.seed("a seed")
        once = first_ids()
        random.seed("a seed")
        assert first_ids() == once
        random.seed("another seed")
        assert first_ids() != once
    finally:
        random.setstate(state)
