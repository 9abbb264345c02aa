"""DelayedOperation and DelayedOperationPurgatory on a ManualClock: the two verbs, expiry, purge."""

import asyncio

from broker.replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from broker.replication.purgatory_view import num_watched, stats, watched
from timer import ManualClock, SystemTimer

TP0 = ("topic", 0)
TP1 = ("topic", 1)


class Op(DelayedOperation):
    """Completes once `ready` says so; records every callback it gets."""

    def __init__(self, delay_ms: int, ready: dict | None = None) -> None:
        super().__init__(delay_ms)
        self.ready = ready if ready is not None else {"go": False}
        self.completions = 0
        self.expirations = 0
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        if self.ready["go"]:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


def setup(purge_interval: int = 1000):
    clock = ManualClock()
    timer = SystemTimer(clock)
    return clock, timer, DelayedOperationPurgatory("produce", timer, purge_interval)


def expire_to(clock: ManualClock, timer: SystemTimer, ms: int) -> None:
    clock.set(ms)
    timer.advance_clock()


def test_completes_at_once_when_it_can_and_is_never_watched():
    _, timer, purgatory = setup()
    op = Op(1000, {"go": True})
    assert purgatory.try_complete_else_watch(op, [TP0]) is True
    assert op.is_completed and op.completions == 1 and op.tries == 1
    assert watched(purgatory, TP0) == 0 and purgatory.delayed == 0 and timer.size == 0
    assert purgatory.completed_count == 1


def test_watched_op_is_tried_twice_then_put_in_the_timer():
    _, timer, purgatory = setup()
    op = Op(1000)
    assert purgatory.try_complete_else_watch(op, [TP0, TP1, TP0]) is False
    assert op.tries == 2  # before and after watching, as Kafka does
    assert watched(purgatory, TP0) == 1 and watched(purgatory, TP1) == 1  # duplicate key folded
    assert num_watched(purgatory) == 2
    assert purgatory.delayed == 1 and timer.size == 1


def test_check_and_complete_wakes_watched_ops_and_leaves_the_timer():
    _, timer, purgatory = setup()
    ready = {"go": False}
    ops = [Op(1000, ready) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, [TP0])
    other = Op(1000)
    purgatory.try_complete_else_watch(other, [TP1])
    assert purgatory.check_and_complete(TP0) == 0
    ready["go"] = True
    assert purgatory.check_and_complete(TP0) == 3
    assert all(op.completions == 1 and op.expirations == 0 for op in ops)
    assert watched(purgatory, TP0) == 0 and TP0 not in purgatory.watchers
    assert purgatory.delayed == 1 and timer.size == 1  # completed ops left the timer at once
    assert purgatory.check_and_complete(TP0) == 0
    assert purgatory.check_and_complete(("nobody", 9)) == 0
    assert purgatory.completed_count == 3 and purgatory.expired_count == 0


def test_expiry_calls_on_complete_then_on_expiration_exactly_once():
    clock, timer, purgatory = setup()
    op = Op(500)
    purgatory.try_complete_else_watch(op, [TP0])
    expire_to(clock, timer, 499)
    assert not op.is_completed
    expire_to(clock, timer, 500)
    assert op.is_completed and op.expired
    assert (op.completions, op.expirations) == (1, 1)
    expire_to(clock, timer, 10_000)
    assert (op.completions, op.expirations) == (1, 1)
    assert purgatory.expired_count == 1 and purgatory.completed_count == 0
    assert purgatory.delayed == 0
    # A late check finds the op completed: not completed again, and it leaves the watcher list.
    op.ready["go"] = True
    assert purgatory.check_and_complete(TP0) == 0
    assert op.completions == 1 and watched(purgatory, TP0) == 0


def test_race_between_check_and_complete_and_expiry_completes_once():
    clock, timer, purgatory = setup()
    ready = {"go": False}

    class Racer(Op):
        def on_complete(self) -> None:
            super().on_complete()
            # While completing via check_and_complete, the timeout fires too.
            expire_to(clock, timer, clock.now_ms() + 1000)

    op = Racer(100, ready)
    purgatory.try_complete_else_watch(op, [TP0])
    ready["go"] = True
    assert purgatory.check_and_complete(TP0) == 1
    assert (op.completions, op.expirations) == (1, 0)
    assert op.force_complete() is False
    op.run()  # a stale timeout firing later changes nothing
    assert (op.completions, op.expirations) == (1, 0)
    assert purgatory.completed_count == 1 and purgatory.expired_count == 0


def test_force_complete_wins_exactly_once_from_every_path():
    clock, timer, purgatory = setup()
    op = Op(100)
    purgatory.try_complete_else_watch(op, [TP0, TP1])
    results = [op.force_complete(), op.force_complete()]
    op.ready["go"] = True
    results.append(op.try_complete())
    expire_to(clock, timer, 1000)
    assert results == [True, False, False]
    assert (op.completions, op.expirations) == (1, 0)
    assert purgatory.check_and_complete(TP0) + purgatory.check_and_complete(TP1) == 0


def test_expiry_racing_a_check_that_completes_in_its_callback():
    clock, timer, purgatory = setup()
    ready = {"go": False}

    class Expiring(Op):
        def on_expiration(self) -> None:
            super().on_expiration()
            ready["go"] = True
            assert purgatory.check_and_complete(TP0) == 0  # already completed by expiry

    op = Expiring(10, ready)
    purgatory.try_complete_else_watch(op, [TP0])
    expire_to(clock, timer, 10)
    assert (op.completions, op.expirations) == (1, 1)


def test_completed_ops_are_purged_from_watcher_lists():
    clock, timer, purgatory = setup(purge_interval=10)
    # Ops watched on two keys, completed via the first: they linger in the second key's list.
    ready = {"go": False}
    for _ in range(10):
        purgatory.try_complete_else_watch(Op(5000, ready), [TP0, TP1])
    ready["go"] = True
    assert purgatory.check_and_complete(TP0) == 10
    assert watched(purgatory, TP1) == 10 and purgatory.delayed == 0
    assert purgatory.purge_runs == 0
    # The estimate of completed-but-watched ops is (ops watched) - (ops delayed): 11 - 1 = 10,
    # not past the interval yet.
    extra = Op(5000)
    purgatory.try_complete_else_watch(extra, [("x", 0)])
    assert purgatory.purge_runs == 0 and watched(purgatory, TP1) == 10
    extra.force_complete()
    purgatory.try_complete_else_watch(Op(5000), [("x", 1)])  # 12 - 1 = 11 > 10: purge
    assert purgatory.purge_runs == 1
    assert watched(purgatory, TP1) == 0 and TP1 not in purgatory.watchers
    assert watched(purgatory, ("x", 0)) == 0
    assert purgatory.purged_count == 11
    assert num_watched(purgatory) == 1 and purgatory.delayed == 1


def test_expired_ops_are_purged_too():
    clock, timer, purgatory = setup(purge_interval=5)
    for i in range(6):
        purgatory.try_complete_else_watch(Op(10), [("t", i)])
    expire_to(clock, timer, 10)
    assert purgatory.expired_count == 6 and num_watched(purgatory) == 6
    purgatory.try_complete_else_watch(Op(10), [("t", 99)])
    assert num_watched(purgatory) == 1 and purgatory.purge_runs == 1


def test_cancel_for_key_returns_uncompleted_ops_and_stops_their_timeouts():
    clock, timer, purgatory = setup()
    a, b = Op(100), Op(100, {"go": True})
    purgatory.try_complete_else_watch(a, [TP0])
    purgatory.try_complete_else_watch(Op(100), [TP1])
    purgatory.try_complete_else_watch(b, [TP0])  # completes at once, never watched
    cancelled = purgatory.cancel_for_key(TP0)
    assert cancelled == [a] and not a.is_completed
    assert watched(purgatory, TP0) == 0 and purgatory.delayed == 1 and timer.size == 1
    expire_to(clock, timer, 1000)
    assert (a.completions, a.expirations) == (0, 0)


def test_shutdown_returns_what_is_left_and_cancels_timeouts():
    clock, timer, purgatory = setup()
    ops = [Op(100) for _ in range(3)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [TP0, ("t", i)])
    ops[0].force_complete()
    left = purgatory.shutdown()
    assert sorted(map(id, left)) == sorted(map(id, ops[1:]))
    assert num_watched(purgatory) == 0 and purgatory.delayed == 0 and timer.size == 0
    expire_to(clock, timer, 1000)
    assert sum(op.expirations for op in ops) == 0


def test_zero_delay_op_expires_when_added_to_the_timer():
    _, timer, purgatory = setup()
    op = Op(0)
    assert purgatory.try_complete_else_watch(op, [TP0]) is False
    assert op.expired and (op.completions, op.expirations) == (1, 1)
    assert purgatory.delayed == 0 and purgatory.expired_count == 1


def test_stats_for_the_admin_view():
    clock, timer, purgatory = setup()
    purgatory.try_complete_else_watch(Op(10, {"go": True}), [TP0])
    purgatory.try_complete_else_watch(Op(10), [TP0, TP1])
    purgatory.try_complete_else_watch(Op(50), [TP1])
    expire_to(clock, timer, 10)
    assert stats(purgatory) == {
        "name": "produce",
        "delayed": 1,
        "watched": 3,
        "keys": 2,
        "completed": 1,
        "expired": 1,
        "purged": 0,
        "purge_runs": 0,
        "purge_interval": 1000,
    }


def test_done_callbacks_and_wait_without_then_with_a_loop():
    op = Op(100)
    seen: list[DelayedOperation] = []
    op.add_done_callback(seen.append)
    op.force_complete()
    op.add_done_callback(seen.append)  # already complete: called at once
    assert seen == [op, op]

    async def waiter() -> None:
        pending = Op(100)
        task = asyncio.ensure_future(pending.wait())
        await asyncio.sleep(0)
        assert not task.done()
        pending.force_complete()
        await asyncio.wait_for(task, 1)
        await pending.wait()  # completed: returns at once

    asyncio.run(waiter())


def test_an_op_failing_in_on_complete_is_still_completed_once():
    clock, timer, purgatory = setup()

    class Broken(Op):
        def on_complete(self) -> None:
            super().on_complete()
            raise RuntimeError("broken")

    op = Broken(10)
    purgatory.try_complete_else_watch(op, [TP0])
    expire_to(clock, timer, 10)  # the timer logs the error and carries on
    assert op.is_completed and op.completions == 1 and timer.task_errors == 1
    assert purgatory.delayed == 0 and purgatory.expired_count == 1


def test_an_op_failing_in_a_check_completes_and_the_others_on_the_key_go_on():
    _, _, purgatory = setup()

    class BrokenCheck(Op):
        def try_complete(self) -> bool:
            raise RuntimeError("broken check")

    class BrokenCompletion(Op):
        def on_complete(self) -> None:
            super().on_complete()
            raise RuntimeError("broken completion")

    ready = {"go": False}
    first, second, healthy = BrokenCheck(1000, ready), BrokenCompletion(1000, ready), Op(1000, ready)
    for op in (first, second, healthy):
        assert not purgatory.try_complete_else_watch(op, [TP0]) or op is first
    assert first.is_completed and first.completions == 1  # completed at once, answered
    ready["go"] = True
    assert purgatory.check_and_complete(TP0) == 2  # no exception escapes to the caller
    assert second.is_completed and second.completions == 1
    assert healthy.is_completed and healthy.completions == 1
    assert purgatory.delayed == 0 and watched(purgatory, TP0) == 0


def test_a_delayed_fetch_whose_read_raises_answers_unknown_server_error():
    from broker.replication.delayed_fetch import DelayedFetch, FetchParams, FetchPartition
    from protocol.errors import ErrorCode

    class BrokenReplicas:  # its partitions cannot even be looked up
        def partition_with_epoch(self, topic, index, current_leader_epoch, *, require_leader=True):
            raise RuntimeError("broken check")

    async def scenario():
        future = asyncio.get_running_loop().create_future()

        def read(_params, _partitions):
            raise RuntimeError("broken read")

        partitions = [FetchPartition("t", 0, 0, 100), FetchPartition("t", 1, 0, 100)]
        op = DelayedFetch(FetchParams(-1, 1000, 1, 100), partitions,
                          replicas=BrokenReplicas(), read=read, future=future)
        assert op.try_complete()  # the broken check answers it now
        assert [d.error for d in future.result()] == [ErrorCode.UNKNOWN_SERVER_ERROR] * 2

    asyncio.run(scenario())


def test_the_reaper_purges_an_idle_purgatory():
    """Operations completed elsewhere (forced) stay in their watcher lists; with nothing parked
    afterwards, the next advance of the timer (the reaper's) purges them, as Kafka's reaper."""
    clock, timer, purgatory = setup(purge_interval=5)
    ops = [Op(60_000) for _ in range(10)]
    for i, op in enumerate(ops):
        assert purgatory.try_complete_else_watch(op, [("topic", i)]) is False
    for op in ops:
        op.force_complete()
    assert num_watched(purgatory) == 10 and purgatory.purge_runs == 0
    expire_to(clock, timer, 1)
    assert num_watched(purgatory) == 0 and purgatory.purge_runs == 1
