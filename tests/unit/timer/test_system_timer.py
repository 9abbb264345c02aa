"""SystemTimer on a ManualClock: expiry times, cancel, per-bucket heap work, hooks, introspection."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from timer import FunctionTimerTask, ManualClock, SystemTimer, TimerTask
from timer import view as timer_view


class Recorder:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.ran: dict[int, int] = {}  # task number -> time it ran

    def task(self, number: int, delay_ms: int) -> FunctionTimerTask:
        def run() -> None:
            assert number not in self.ran, "a task ran twice"
            self.ran[number] = self.clock.now_ms()

        return FunctionTimerTask(delay_ms, run)


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(0, 10**9),
    delays=st.lists(st.integers(-5, 20_000), min_size=1, max_size=200),
    steps=st.lists(st.integers(0, 3_000), min_size=1, max_size=40),
    cancel_seed=st.integers(0, 2**32),
)
def test_every_task_runs_at_its_expiration_never_earlier(start, delays, steps, cancel_seed):
    clock = ManualClock(start)
    timer = SystemTimer(clock)
    rec = Recorder(clock)
    expirations = {}
    tasks = []
    for number, delay in enumerate(delays):
        expirations[number] = start + delay
        task = rec.task(number, delay)
        tasks.append(task)
        timer.add(task)
    rng = random.Random(cancel_seed)
    cancelled = {n for n in range(len(tasks)) if rng.random() < 0.2 and n not in rec.ran}
    for n in cancelled:
        tasks[n].cancel()
    assert timer.size == len(tasks) - len(cancelled) - len(rec.ran)
    for step in [*steps, 25_000]:
        clock.advance(step)
        now = clock.now_ms()
        timer.advance_clock(now)
        for n, expiration in expirations.items():
            if n in cancelled:
                assert n not in rec.ran
            elif expiration <= now:
                assert n in rec.ran, f"task due at {expiration} not run by {now}"
        for n, ran_at in rec.ran.items():
            assert ran_at >= expirations[n]
    assert timer.size == 0
    assert set(rec.ran) == set(range(len(tasks))) - cancelled


def test_tasks_in_order_of_expiration_when_time_moves_ms_by_ms():
    clock = ManualClock()
    timer = SystemTimer(clock)
    order: list[int] = []
    delays = random.Random(7).sample(range(1, 3000), 500)
    for d in delays:
        timer.add(FunctionTimerTask(d, lambda d=d: order.append(d)))
    for t in range(1, 3001):
        clock.set(t)
        timer.advance_clock()
        assert order == sorted(x for x in delays if x <= t)


def test_task_already_due_runs_inline_in_add():
    clock = ManualClock(100)
    timer = SystemTimer(clock)
    ran = []
    timer.add(FunctionTimerTask(0, lambda: ran.append("zero")))
    timer.add(FunctionTimerTask(-10, lambda: ran.append("negative")))
    assert ran == ["zero", "negative"] and timer.size == 0


def test_cancelled_tasks_never_run_and_size_drops():
    clock = ManualClock()
    timer = SystemTimer(clock)
    ran: list[int] = []
    tasks = [FunctionTimerTask(10 + i, lambda i=i: ran.append(i)) for i in range(1000)]
    for task in tasks:
        timer.add(task)
    assert timer.size == 1000
    for task in tasks[::2]:
        task.cancel()
    assert timer.size == 500
    clock.set(5_000)
    timer.advance_clock()
    assert ran == list(range(1, 1000, 2))
    assert timer.size == 0


def test_cancel_after_running_is_a_no_op():
    clock = ManualClock()
    timer = SystemTimer(clock)
    task = FunctionTimerTask(5, lambda: None)
    timer.add(task)
    clock.set(5)
    timer.advance_clock()
    task.cancel()
    assert timer.size == 0 and task.timer_task_entry is None


def test_re_adding_a_task_moves_it_instead_of_running_it_twice():
    clock = ManualClock()
    timer = SystemTimer(clock)
    ran: list[int] = []
    task = FunctionTimerTask(10, lambda: ran.append(clock.now_ms()))
    timer.add(task)
    task.delay_ms = 30
    timer.add(task)
    assert timer.size == 1
    clock.set(100)
    timer.advance_clock()
    assert ran == [100]


def test_heap_pushes_are_per_bucket_not_per_task():
    clock = ManualClock()
    timer = SystemTimer(clock)
    for _ in range(1000):
        timer.add(FunctionTimerTask(7, lambda: None))
    assert timer.size == 1000
    assert timer.queue.pushes == 1 and len(timer.queue) == 1
    for _ in range(1000):  # 1000 more tasks spread over 3 buckets of level 2
        timer.add(FunctionTimerTask(random.randint(100, 159), lambda: None))
    assert timer.queue.pushes == 4


def test_next_expiration_and_earliest_changed_hook():
    clock = ManualClock()
    timer = SystemTimer(clock)
    heard: list[int] = []
    timer.on_earliest_changed = heard.append
    assert timer.next_expiration_ms() is None
    timer.add(FunctionTimerTask(300, lambda: None))  # level 2 bucket at 300
    timer.add(FunctionTimerTask(310, lambda: None))  # same bucket [300, 320): no push, no call
    timer.add(FunctionTimerTask(500, lambda: None))  # later bucket: pushed, not the earliest
    timer.add(FunctionTimerTask(5, lambda: None))  # earlier: the reaper must wake
    assert heard == [300, 5]
    assert timer.next_expiration_ms() == 5


def test_a_task_may_add_tasks_while_the_timer_is_flushing():
    clock = ManualClock()
    timer = SystemTimer(clock)
    ran: list[tuple[str, int]] = []

    def chain(n: int) -> None:
        ran.append((f"chain{n}", clock.now_ms()))
        if n < 3:
            timer.add(FunctionTimerTask(0 if n == 0 else 25, lambda: chain(n + 1)))

    timer.add(FunctionTimerTask(20, lambda: chain(0)))
    clock.set(20)
    timer.advance_clock()
    assert ran == [("chain0", 20), ("chain1", 20)]
    clock.set(44)
    timer.advance_clock()
    assert ran[-1] == ("chain1", 20)
    clock.set(45)
    timer.advance_clock()
    assert ran[-1] == ("chain2", 45)


def test_a_failing_task_does_not_stop_the_others():
    class Boom(TimerTask):
        def run(self) -> None:
            raise RuntimeError("boom")

    clock = ManualClock()
    timer = SystemTimer(clock)
    ran: list[int] = []
    timer.add(FunctionTimerTask(3, lambda: ran.append(1)))
    timer.add(Boom(3))
    timer.add(FunctionTimerTask(3, lambda: ran.append(2)))
    clock.set(3)
    timer.advance_clock()
    assert ran == [1, 2] and timer.task_errors == 1 and timer.size == 0


def test_levels_report_buckets_and_tasks():
    clock = ManualClock()
    timer = SystemTimer(clock)
    for delay in (2, 2, 3, 350, 450):
        timer.add(FunctionTimerTask(delay, lambda: None))
    by_level = {lv["level"]: lv for lv in timer_view.levels(timer)}
    assert (by_level[1]["occupied_buckets"], by_level[1]["tasks"]) == (2, 3)
    assert (by_level[2]["occupied_buckets"], by_level[2]["tasks"]) == (1, 1)
    assert (by_level[3]["occupied_buckets"], by_level[3]["tasks"]) == (1, 1)
    # Per bucket (wheel size 20): 2 ms twice and 3 ms on level 1, 350 ms in [340, 360) on level 2.
    assert by_level[1]["buckets"][2:4] == [2, 1] and sum(by_level[1]["buckets"]) == 3
    assert by_level[2]["buckets"][17] == 1 and len(by_level[2]["buckets"]) == 20
    assert by_level[1]["wheel_size"] == 20 and by_level[1]["current_bucket"] == 0
    stats = timer_view.stats(timer)
    assert stats["size"] == 5 and stats["next_expiration_ms"] == 2 and stats["now_ms"] == 0


def test_shutdown_stops_running_tasks():
    clock = ManualClock()
    timer = SystemTimer(clock)
    ran: list[int] = []
    timer.add(FunctionTimerTask(5, lambda: ran.append(1)))
    timer.shutdown()
    timer.add(FunctionTimerTask(5, lambda: ran.append(2)))
    clock.set(10)
    assert timer.advance_clock() is False
    assert ran == []
