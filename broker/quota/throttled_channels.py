"""Kafka's throttled-channel delay queue (ThrottledChannel, ThrottledChannelReaper): a throttled
connection stays muted until its delay, a task on the broker's timing wheel, ends (KIP-219)."""

from __future__ import annotations

import asyncio

from timer import FunctionTimerTask, SystemTimer


class ThrottledChannels:
    """The "throttle" delay queue: one timer task per muted connection."""

    def __init__(self, timer: SystemTimer) -> None:
        self.timer = timer
        self.delayed = 0  # connections muted now
        self.expired = 0  # delays that ran their course: the connection was unmuted
        self.completed = 0  # delays cut short: the connection closed while muted
        self.throttled: dict[str, int] = {"produce": 0, "fetch": 0, "request": 0}
        self.throttle_ms_total = 0

    async def mute(self, quota_type: str, throttle_ms: int) -> None:
        """Return once `throttle_ms` have passed on the broker's clock."""
        future = asyncio.get_running_loop().create_future()

        def unmute() -> None:
            if not future.done():
                future.set_result(None)

        task = FunctionTimerTask(throttle_ms, unmute)
        self.delayed += 1
        self.throttled[quota_type] = self.throttled.get(quota_type, 0) + 1
        self.throttle_ms_total += throttle_ms
        try:
            self.timer.add(task)
            await future
            self.expired += 1
        except BaseException:
            self.completed += 1
            raise
        finally:
            task.cancel()  # the connection closed first: its delay leaves the wheel
            self.delayed -= 1

    def stats(self) -> dict:
        """As a purgatory's (a delay queue watches no keys), and the throttles per quota type."""
        return {"name": "throttle", "delayed": self.delayed, "watched": 0, "keys": 0,
                "completed": self.completed, "expired": self.expired,
                "throttled": dict(self.throttled), "throttle_ms_total": self.throttle_ms_total}
