"""IdleSweeper: closes the connections of a broker that completed no request for
connections.max.idle.ms, with one timer for them all (Kafka's Selector keeps its channels in
least-recently-used order and closes the expired ones from the oldest)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Protocol


class Sweepable(Protocol):
    handling: bool  # a request of it is in the broker: that time does not count as idle

    def close_idle(self) -> None: ...


class IdleSweeper:
    """Each connection's deadline in loop time (real time: a client's silence is wall-clock),
    oldest first. Marking a connection active costs a dict update, not the timeout around each
    read it replaces (~4 us a request)."""

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        self._deadlines: OrderedDict[Sweepable, float] = OrderedDict()
        self._timer: asyncio.TimerHandle | None = None

    def active(self, connection: Sweepable) -> None:
        """`connection` opened or completed a request: its idle time starts again now."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.idle_s
        self._deadlines[connection] = deadline
        self._deadlines.move_to_end(connection)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._sweep)

    def forget(self, connection: Sweepable) -> None:
        self._deadlines.pop(connection, None)

    def _sweep(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadlines = self._deadlines
        while deadlines:
            connection, deadline = next(iter(deadlines.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._sweep)
                return
            if connection.handling:  # its time in the broker: counted from when it is answered
                deadlines[connection] = now + self.idle_s
                deadlines.move_to_end(connection)
                continue
            del deadlines[connection]
            connection.close_idle()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._deadlines.clear()
