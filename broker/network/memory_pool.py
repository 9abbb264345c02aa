"""The bytes of requests in flight on one broker, bounded (Kafka's `queued.max.request.bytes` and
the SimpleMemoryPool its network threads read into): a connection reserves a large frame's size
before reading its body and releases it once the request is answered; while the pool is spent,
connections with large frames stop reading (TCP pushes back on their clients), the rest go on.

As Kafka's pool (non-strict), a reservation is granted whenever anything is left, even if it is
more than what is left, so one frame of `socket.request.max.bytes` always gets through.
"""

from __future__ import annotations

import asyncio


class RequestMemoryPool:
    """`max_bytes` <= 0: unbounded (Kafka's -1)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.available = max_bytes
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def bounded(self) -> bool:
        return self.max_bytes > 0

    @property
    def waiting(self) -> int:
        """Connections waiting for room."""
        return len(self._waiters)

    @property
    def in_use(self) -> int:
        return self.max_bytes - self.available if self.bounded else 0

    async def reserve(self, size: int) -> None:
        """Take `size` bytes, waiting while nothing is left."""
        if not self.bounded:
            return
        while self.available <= 0:
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            try:
                await future
            finally:
                if future in self._waiters:
                    self._waiters.remove(future)
        self.available -= size

    def release(self, size: int) -> None:
        if not self.bounded:
            return
        self.available += size
        if self.available > 0 and self._waiters:
            # Every waiter tries again; the first to run takes what it needs.
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
