"""TimingWheel and bucket placement: Kafka's worked examples at tick 1 ms, 20 buckets, from 0."""

from timer import FunctionTimerTask, ManualClock, SystemTimer, TaskCounter, TimerTaskEntry
from timer import view as timer_view
from timer.timing_wheel import TimingWheel


class RecordingQueue:
    def __init__(self) -> None:
        self.pushed: list[int] = []

    def push(self, bucket) -> None:
        self.pushed.append(bucket.expiration)


def make_timer(start_ms: int = 0) -> tuple[ManualClock, SystemTimer, list[tuple[str, int]]]:
    clock = ManualClock(start_ms)
    return clock, SystemTimer(clock, tick_ms=1, wheel_size=20), []


def add(timer: SystemTimer, clock: ManualClock, ran: list, name: str, delay_ms: int):
    task = FunctionTimerTask(delay_ms, lambda: ran.append((name, clock.now_ms())))
    timer.add(task)
    return task


def step_to(timer: SystemTimer, clock: ManualClock, ms: int) -> None:
    clock.set(ms)
    timer.advance_clock(ms)


def test_wheel_levels_have_kafka_ticks_and_intervals():
    clock, timer, ran = make_timer()
    add(timer, clock, ran, "far", 10_000)
    levels = [(lv["level"], lv["tick_ms"], lv["interval_ms"]) for lv in timer_view.levels(timer)]
    assert levels == [(1, 1, 20), (2, 20, 400), (3, 400, 8000), (4, 8000, 160_000)]


def test_task_due_at_2ms_lands_in_bucket_2_of_level_1():
    clock, timer, ran = make_timer()
    task = add(timer, clock, ran, "t2", 2)
    assert timer_view.locate(task) == (1, 2)
    bucket = timer_view.wheels(timer)[0].buckets[2]
    assert list(bucket) == [task]
    assert bucket.expiration == 2
    step_to(timer, clock, 1)
    assert ran == []
    step_to(timer, clock, 2)
    assert ran == [("t2", 2)]


def test_task_due_at_350ms_lands_in_bucket_17_of_level_2_then_runs_at_350():
    clock, timer, ran = make_timer()
    task = add(timer, clock, ran, "t350", 350)
    assert timer_view.locate(task) == (2, 17)
    level2 = timer_view.wheels(timer)[1]
    assert (level2.tick_ms, level2.interval) == (20, 400)
    assert level2.buckets[17].expiration == 340  # covers [340, 360)
    step_to(timer, clock, 339)
    assert timer_view.locate(task) == (2, 17)
    step_to(timer, clock, 340)
    assert timer_view.locate(task) == (1, 350 % 20)
    step_to(timer, clock, 349)
    assert ran == []
    step_to(timer, clock, 350)
    assert ran == [("t350", 350)]


def test_task_due_at_450ms_is_downgraded_level_3_to_2_to_1_and_runs_at_450():
    clock, timer, ran = make_timer()
    task = add(timer, clock, ran, "t450", 450)
    # Level 3: tick 400 ms, bucket 450 // 400 % 20 = 1, covering [400, 800).
    assert timer_view.locate(task) == (3, 1)
    level3 = timer_view.wheels(timer)[2]
    assert (level3.tick_ms, level3.interval) == (400, 8000)
    assert level3.buckets[1].expiration == 400
    assert timer.next_expiration_ms() == 400

    step_to(timer, clock, 399)
    assert timer_view.locate(task) == (3, 1)

    # At 400 the level-3 bucket is flushed: the task is 50 ms away, in the level-2 bucket
    # covering [440, 460) (that is [40, 60) from the 400 ms bucket start): index 450 // 20 % 20.
    step_to(timer, clock, 400)
    assert timer_view.locate(task) == (2, 2)
    bucket = timer_view.wheels(timer)[1].buckets[2]
    assert bucket.expiration == 440
    assert list(bucket) == [task]
    assert ran == []

    # At 440 it goes to the level-1 bucket [450, 451) ("[10, 11)"): index 450 % 20 = 10.
    step_to(timer, clock, 440)
    assert timer_view.locate(task) == (1, 10)
    assert timer_view.wheels(timer)[0].buckets[10].expiration == 450

    step_to(timer, clock, 449)
    assert ran == []
    step_to(timer, clock, 450)
    assert ran == [("t450", 450)]
    assert timer.size == 0
    assert timer_view.locate(task) is None


def test_one_big_clock_jump_still_runs_the_task_and_nothing_early():
    clock, timer, ran = make_timer()
    add(timer, clock, ran, "t450", 450)
    clock.set(10_000)
    assert timer.advance_clock() is True
    assert ran == [("t450", 10_000)]


def test_current_time_is_rounded_down_to_a_tick():
    wheel = TimingWheel(20, 20, 347, TaskCounter(), RecordingQueue())
    assert wheel.current_time == 340
    wheel.advance_clock(359)
    assert wheel.current_time == 340
    wheel.advance_clock(361)
    assert wheel.current_time == 360


def test_add_refuses_expired_and_cancelled_entries():
    counter, queue = TaskCounter(), RecordingQueue()
    wheel = TimingWheel(1, 20, 100, counter, queue)
    due_now = TimerTaskEntry(FunctionTimerTask(0, lambda: None), 100)
    assert wheel.add(due_now) is False  # expiration < current_time + tick: the caller runs it
    task = FunctionTimerTask(5, lambda: None)
    entry = TimerTaskEntry(task, 105)
    task.cancel()
    assert wheel.add(entry) is False
    assert counter.value == 0
    assert wheel.add(TimerTaskEntry(FunctionTimerTask(5, lambda: None), 105)) is True
    assert counter.value == 1
    assert queue.pushed == [105]


def test_overflow_wheel_is_made_only_when_needed():
    counter, queue = TaskCounter(), RecordingQueue()
    wheel = TimingWheel(1, 20, 0, counter, queue)
    wheel.add(TimerTaskEntry(FunctionTimerTask(19, lambda: None), 19))
    assert wheel.overflow_wheel is None
    wheel.add(TimerTaskEntry(FunctionTimerTask(20, lambda: None), 20))
    assert wheel.overflow_wheel is not None
    assert wheel.overflow_wheel.tick_ms == 20
    assert timer_view.bucket_for(wheel.overflow_wheel, 20).expiration == 20
