"""KafkaScheduler on a ManualClock: periodic jobs follow the clock, an asynchronous job's next run
waits for it to finish, a failing job runs again, cancel and shutdown stop them."""

from __future__ import annotations

import asyncio

from timer import ManualClock, SystemTimer
from timer.scheduler import NEVER_MS, KafkaScheduler


def setup():
    clock = ManualClock()
    timer = SystemTimer(clock)
    errors: list[tuple[str, BaseException]] = []
    return clock, timer, KafkaScheduler(timer, lambda name, exc: errors.append((name, exc))), errors


def advance(clock: ManualClock, timer: SystemTimer, ms: int) -> None:
    clock.advance(ms)
    timer.advance_clock()


def test_a_periodic_job_runs_every_period_on_the_clock():
    clock, timer, scheduler, _ = setup()
    runs: list[int] = []
    scheduler.schedule("tick", lambda: runs.append(clock.now_ms()), 100, delay_ms=10)
    scheduler.schedule("never", lambda: runs.append(-1), NEVER_MS)
    for _ in range(31):
        advance(clock, timer, 10)
    assert runs == [10, 110, 210, 310]
    scheduler.cancel("tick")
    advance(clock, timer, 1_000)
    assert runs == [10, 110, 210, 310]
    assert scheduler.jobs() == []


def test_a_failing_job_is_reported_and_runs_again():
    clock, timer, scheduler, errors = setup()
    runs = []

    def job() -> None:
        runs.append(clock.now_ms())
        raise ValueError("broken")

    scheduler.schedule("broken", job, 50)
    for _ in range(3):
        advance(clock, timer, 50)
    assert runs == [50, 100, 150] and [name for name, _ in errors] == ["broken"] * 3


async def test_an_asynchronous_job_never_overlaps_itself_and_shutdown_cancels_it():
    clock, timer, scheduler, _ = setup()
    started: list[int] = []
    release = asyncio.Event()

    async def job() -> None:
        started.append(clock.now_ms())
        await release.wait()

    scheduler.schedule("slow", job, 10)
    advance(clock, timer, 10)
    await asyncio.sleep(0)
    for _ in range(5):  # its run has not finished: no second one
        advance(clock, timer, 10)
    assert started == [10] and scheduler.jobs()[0]["running"]
    release.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    release.clear()
    advance(clock, timer, 10)  # the next run comes one period after the first ended
    await asyncio.sleep(0)
    assert started == [10, 70]
    running = scheduler.shutdown()
    await asyncio.gather(*running, return_exceptions=True)
    assert all(f.cancelled() for f in running) and scheduler.jobs() == []
