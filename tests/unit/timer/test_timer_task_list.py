"""Buckets and entries: O(1) add/remove, flush, expiration changes, one entry per task."""

from timer import FunctionTimerTask, ManualClock, TaskCounter, TimerTaskEntry, TimerTaskList


def noop() -> None:
    pass


def test_add_remove_and_shared_counter():
    counter = TaskCounter()
    a, b = TimerTaskList(counter), TimerTaskList(counter)
    tasks = [FunctionTimerTask(10, noop) for _ in range(3)]
    entries = [TimerTaskEntry(t, 10) for t in tasks]
    for e in entries[:2]:
        a.add(e)
    b.add(entries[2])
    assert (len(a), len(b), counter.value) == (2, 1, 3)
    entries[0].remove()
    assert (len(a), counter.value) == (1, 2)
    assert list(a) == [tasks[1]]
    b.add(entries[1])  # moving an entry unlinks it from its old bucket first
    assert (len(a), len(b), counter.value) == (0, 2, 2)


def test_new_entry_for_a_task_replaces_the_old_one():
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    task = FunctionTimerTask(10, noop)
    old = TimerTaskEntry(task, 10)
    bucket.add(old)
    new = TimerTaskEntry(task, 20)
    assert old.cancelled and not new.cancelled
    assert old.list is None and len(bucket) == 0 and counter.value == 0
    bucket.add(old)  # a superseded entry is never linked again
    assert len(bucket) == 0


def test_cancel_unlinks_in_place():
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    task = FunctionTimerTask(10, noop)
    entry = TimerTaskEntry(task, 10)
    bucket.add(entry)
    task.cancel()
    assert entry.cancelled and entry.list is None
    assert len(bucket) == 0 and counter.value == 0
    task.cancel()  # twice is harmless


def test_set_expiration_reports_changes_and_flush_resets_it():
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    assert bucket.expiration == -1
    assert bucket.set_expiration(40) is True
    assert bucket.set_expiration(40) is False
    entries = [TimerTaskEntry(FunctionTimerTask(40, noop), 40 + i) for i in range(5)]
    for e in entries:
        bucket.add(e)
    seen: list[TimerTaskEntry] = []

    def collect(entry: TimerTaskEntry) -> None:
        assert entry.list is None and len(bucket) == 0  # emptied before any callback
        seen.append(entry)

    bucket.flush(collect)
    assert seen == entries
    assert bucket.expiration == -1 and len(bucket) == 0 and counter.value == 0
    assert bucket.set_expiration(40) is True


def test_manual_clock_listeners_and_no_going_back():
    clock = ManualClock(5)
    heard: list[int] = []
    clock.add_listener(heard.append)
    clock.advance(3)
    clock.set(10)
    clock.remove_listener(heard.append)
    clock.advance(1)
    assert heard == [8, 10] and clock.now_ms() == 11
    for bad in (lambda: clock.set(3), lambda: clock.advance(-1)):
        try:
            bad()
        except ValueError:
            pass
        else:
            raise AssertionError("time went back")
