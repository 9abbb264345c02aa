"""How the controller shares the event loop with the brokers' connections: long work (thousands of
partitions in a request, a failover's load) steps aside between chunks."""

from __future__ import annotations

import asyncio

# Partitions an admin request's event handles between two steps aside (~1 ms of work each way).
REQUEST_CHUNK = 1000
# How the controller steps aside between two chunks: a timer, not sleep(0), which puts it back
# in the ready queue ahead of every timer and socket that came due meanwhile (they would wait a
# second chunk).
STEP_ASIDE_S = 0.001


async def serve_others() -> None:
    await asyncio.sleep(STEP_ASIDE_S)
