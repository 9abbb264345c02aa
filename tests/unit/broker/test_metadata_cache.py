"""MetadataCache.wait_for: answered by the update that satisfies the condition, or False at its
deadline on the broker's timer (a manual clock here: no wall time passes)."""

from __future__ import annotations

import asyncio

from broker.metadata.metadata_cache import MetadataCache, MetadataSnapshot
from timer import ManualClock, SystemTimer


async def test_a_wait_ends_false_at_its_deadline_on_the_timer():
    clock = ManualClock()
    timer = SystemTimer(clock)
    cache = MetadataCache(timer)
    waiting = asyncio.ensure_future(cache.wait_for(lambda s: s.controller_id == 3, 5_000))
    await asyncio.sleep(0)  # let it park
    clock.advance(4_999)
    timer.advance_clock()
    await asyncio.sleep(0)
    assert not waiting.done()
    clock.advance(1)
    timer.advance_clock()
    assert await waiting is False
    assert timer.size == 0


async def test_a_wait_ends_true_on_the_update_and_its_deadline_is_cancelled():
    clock = ManualClock()
    timer = SystemTimer(clock)
    cache = MetadataCache(timer)
    waiting = asyncio.ensure_future(cache.wait_for(lambda s: s.controller_id == 3, 5_000))
    await asyncio.sleep(0)
    cache.update(MetadataSnapshot(3, 1))
    assert await waiting is True
    assert timer.size == 0  # its deadline left the wheel
    clock.advance(10_000)
    timer.advance_clock()  # the cancelled deadline runs nothing
    assert await cache.wait_for(lambda s: s.controller_id == 3, 0) is True  # already true
