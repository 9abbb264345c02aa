"""The event-loop monitor: the lag of its ticks, and the watchdog naming the task that held the
loop (real time: the monitor measures the loop, which no manual clock moves)."""

from __future__ import annotations

import asyncio
import time

from structlog.testing import capture_logs

from broker.server.loop_monitor import LoopMonitor


async def test_a_step_holding_the_loop_is_named_and_counted_in_the_lag():
    monitor = LoopMonitor(tick_s=0.02, held_warning_s=0.2)
    monitor.start()
    try:
        await asyncio.sleep(0.1)  # a few ticks on time
        assert monitor.lag().samples > 0

        async def hostage() -> None:
            time.sleep(0.6)  # a step that never yields

        with capture_logs() as logs:
            await asyncio.create_task(hostage(), name="the-hostage-taker")
            await asyncio.sleep(0.1)  # the next tick records the lateness
        held = [e for e in logs if e["event"] == "event loop held"]
        assert len(held) == 1
        assert held[0]["task"] == "the-hostage-taker"
        assert "hostage" in held[0]["where"]
        assert monitor.held_warnings == 1
        assert monitor.lag().max_ms >= 500
    finally:
        await monitor.stop()


async def test_an_idle_loop_has_no_lag_to_speak_of():
    monitor = LoopMonitor(tick_s=0.02, held_warning_s=0.2)
    monitor.start()
    try:
        await asyncio.sleep(0.3)
        lag = monitor.lag()
        assert lag.samples >= 5
        assert lag.max_ms < 200 and monitor.held_warnings == 0
    finally:
        await monitor.stop()
