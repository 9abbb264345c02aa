"""VirtualClock: real time until frozen, moved by advance, resumed without going back; the reaper
follows it (woken on advance, no real deadline while frozen)."""

import asyncio

import pytest

from timer import ExpiredOperationReaper, FunctionTimerTask, SystemTimer, VirtualClock


class FakeReal:
    """The real monotonic and wall readings, moved by the test."""

    def __init__(self) -> None:
        self.mono = 1_000
        self.wall = 1_700_000_000_000

    def pass_ms(self, ms: int) -> None:
        self.mono += ms
        self.wall += ms


def make() -> tuple[VirtualClock, FakeReal]:
    real = FakeReal()
    return VirtualClock(lambda: real.mono, lambda: real.wall), real


def test_running_follows_real_time_and_advance_jumps_both_readings():
    clock, real = make()
    assert (clock.now_ms(), clock.wall_ms()) == (1_000, 1_700_000_000_000)
    real.pass_ms(5)
    clock.advance(100)
    assert (clock.now_ms(), clock.wall_ms()) == (1_105, 1_700_000_000_105)
    assert clock.state().to_dict() == {"frozen": False, "now_ms": 1_105,
                                       "wall_ms": 1_700_000_000_105, "offset_ms": 100}


def test_frozen_time_moves_only_by_advance_and_resume_continues_from_it():
    clock, real = make()
    clock.freeze()
    real.pass_ms(10_000)
    assert (clock.now_ms(), clock.wall_ms()) == (1_000, 1_700_000_000_000)
    assert clock.state().offset_ms == -10_000
    clock.advance(45_000)
    assert (clock.now_ms(), clock.wall_ms()) == (46_000, 1_700_000_045_000)
    assert clock.state().frozen and not clock.ticking
    clock.resume()
    assert clock.now_ms() == 46_000 and clock.ticking
    real.pass_ms(7)
    assert (clock.now_ms(), clock.wall_ms()) == (46_007, 1_700_000_045_007)
    assert clock.state().offset_ms == 35_000


def test_advance_refuses_to_go_back_and_listeners_hear_each_change():
    clock, _ = make()
    heard: list[int] = []
    clock.add_listener(heard.append)
    clock.freeze()
    clock.freeze()  # already frozen: nothing changes, nobody is told
    clock.advance(5)
    clock.resume()
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert heard == [1_000, 1_005, 1_005]


async def test_reaper_fires_on_advance_of_a_frozen_clock_and_on_real_time_after_resume():
    clock = VirtualClock()
    timer = SystemTimer(clock)
    reaper = ExpiredOperationReaper(timer, clock)
    reaper.start()
    clock.freeze()
    session_expired = asyncio.Event()
    timer.add(FunctionTimerTask(45_000, session_expired.set))
    at_44s = asyncio.Event()
    timer.add(FunctionTimerTask(44_999, at_44s.set))
    clock.advance(44_999)
    await asyncio.wait_for(at_44s.wait(), 2)
    assert not session_expired.is_set()
    clock.advance(1)
    await asyncio.wait_for(session_expired.wait(), 2)
    # Resumed, the reaper waits on a real deadline again: a 5 ms task fires by itself.
    clock.resume()
    due = asyncio.Event()
    timer.add(FunctionTimerTask(5, due.set))
    await asyncio.wait_for(due.wait(), 2)
    await reaper.stop()
