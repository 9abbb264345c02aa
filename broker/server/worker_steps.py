"""Runs the steps a storage generator yields in a worker thread, the rest on the event loop.

storage/ never imports asyncio: work that must leave the loop (the log cleaner's reading and
writing) comes as a generator that yields each heavy step and does the light ones (picking a
range, swapping files in) where it is advanced. This drives one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import TypeVar

T = TypeVar("T")


async def run_steps_in_worker(steps: Generator[Callable[[], None], None, T]) -> T:
    """Advance `steps` on the loop, run each step it yields with asyncio.to_thread, send back
    None or throw in the step's exception; returns the generator's value. Cancelled, it lets the
    running step finish before closing the generator (which then cleans up after itself)."""
    try:
        step = next(steps)
    except StopIteration as stop:
        return stop.value
    while True:
        work = asyncio.ensure_future(asyncio.to_thread(step))
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            def close(done: asyncio.Future) -> None:
                if not done.cancelled():
                    done.exception()  # retrieved: the generator is closed either way
                steps.close()

            work.add_done_callback(close)
            raise
        except Exception as exc:
            try:
                step = steps.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            step = steps.send(None)
        except StopIteration as stop:
            return stop.value
