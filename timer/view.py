"""What the admin view, the console and the tests see of the timer: the wheel levels, where a task
waits, and the counts (the timer's own classes keep only what running it needs)."""

from __future__ import annotations

from typing import Any

from timer.system_timer import SystemTimer
from timer.timer_task import TimerTask
from timer.timer_task_list import TimerTaskList
from timer.timing_wheel import TimingWheel


def wheels(timer: SystemTimer) -> list[TimingWheel]:
    """The wheel levels that exist so far, lowest (finest tick) first."""
    levels = []
    wheel: TimingWheel | None = timer.wheel
    while wheel is not None:
        levels.append(wheel)
        wheel = wheel.overflow_wheel
    return levels


def locate(task: TimerTask) -> tuple[int, int] | None:
    """(level, bucket index) where `task` waits, levels counted from 1; None if not pending."""
    entry = task.timer_task_entry
    bucket = entry.list if entry is not None else None
    if bucket is None:
        return None
    return bucket.level, bucket.index


def bucket_for(wheel: TimingWheel, expiration_ms: int) -> TimerTaskList:
    """The bucket of `wheel`'s level that an expiration maps to."""
    return wheel.buckets[(expiration_ms // wheel.tick_ms) % wheel.wheel_size]


def current_bucket(wheel: TimingWheel) -> int:
    """The index of the bucket that covers the level's current time (the ring's hand)."""
    return (wheel.current_time // wheel.tick_ms) % wheel.wheel_size


def levels(timer: SystemTimer) -> list[dict[str, Any]]:
    """Per wheel level: tick, interval, current time, occupied buckets, tasks, and each bucket's
    task count (the console draws each level as a ring of them) with the current one's index."""
    out = []
    for wheel in wheels(timer):
        counts = [len(bucket) for bucket in wheel.buckets]
        out.append({
            "level": wheel.level,
            "tick_ms": wheel.tick_ms,
            "interval_ms": wheel.interval,
            "current_time_ms": wheel.current_time,
            "occupied_buckets": sum(1 for n in counts if n),
            "tasks": sum(counts),
            "wheel_size": wheel.wheel_size,
            "current_bucket": current_bucket(wheel),
            "buckets": counts,
        })
    return out


def stats(timer: SystemTimer) -> dict[str, Any]:
    """The timer as the control API's /stats shows it."""
    return {
        "size": timer.size,
        "now_ms": timer.clock.now_ms(),
        "next_expiration_ms": timer.next_expiration_ms(),
        "heap_entries": len(timer.queue),
        "heap_pushes": timer.queue.pushes,
        "task_errors": timer.task_errors,
        "levels": levels(timer),
    }
