"""ExpiredOperationReaper: fires due tasks when a ManualClock moves, and on a real clock."""

import asyncio

from timer import (
    ExpiredOperationReaper,
    FunctionTimerTask,
    ManualClock,
    MonotonicClock,
    SystemTimer,
)


async def test_reaper_follows_a_manual_clock():
    clock = ManualClock()
    timer = SystemTimer(clock)
    reaper = ExpiredOperationReaper(timer, clock)
    reaper.start()
    fired = asyncio.Event()
    ran_at: list[int] = []

    def run() -> None:
        ran_at.append(clock.now_ms())
        fired.set()

    timer.add(FunctionTimerTask(450, run))
    # A marker due at 449 shows the reaper has processed time 449 before we look.
    at_449 = asyncio.Event()
    timer.add(FunctionTimerTask(449, at_449.set))
    clock.advance(449)
    await asyncio.wait_for(at_449.wait(), 2)
    assert not fired.is_set()
    clock.advance(1)
    await asyncio.wait_for(fired.wait(), 2)
    assert ran_at == [450]
    await reaper.stop()
    assert not reaper.running
    assert timer.on_earliest_changed is None


async def test_reaper_fires_a_5ms_task_on_the_monotonic_clock():
    clock = MonotonicClock()
    timer = SystemTimer(clock)
    reaper = ExpiredOperationReaper(timer, clock)
    reaper.start()
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    added_at = clock.now_ms()
    timer.add(FunctionTimerTask(5, lambda: done.set_result(clock.now_ms())))
    ran_at = await asyncio.wait_for(done, 2)
    assert ran_at >= added_at + 5
    await reaper.stop()


async def test_reaper_wakes_for_a_task_earlier_than_the_one_it_waits_for():
    clock = MonotonicClock()
    timer = SystemTimer(clock)
    reaper = ExpiredOperationReaper(timer, clock)
    reaper.start()
    timer.add(FunctionTimerTask(60_000, lambda: None))
    await asyncio.sleep(0)  # the reaper now waits for a bucket a minute away
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    timer.add(FunctionTimerTask(2, lambda: done.set_result(None)))
    await asyncio.wait_for(done, 2)
    await reaper.stop()


async def test_stop_is_prompt_with_nothing_pending():
    clock = ManualClock()
    reaper = ExpiredOperationReaper(SystemTimer(clock), clock)
    reaper.start()
    await asyncio.sleep(0)
    await asyncio.wait_for(reaper.stop(), 1)
    await reaper.stop()  # twice is harmless
