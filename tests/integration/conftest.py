"""Fixtures that run a real broker on an ephemeral loopback port with a temporary data directory.

The broker gets its own event loop in a thread, so blocking clients (kafka-python,
confluent-kafka) and asyncio clients (aiokafka, in the test's loop) talk to it over real TCP.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import build_config


class BrokerThread:
    """A broker in a background thread; start/stop/restart keep the same data directory."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir),
                          **(overrides or {})}
        self.broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, port: int | None = None) -> BrokerThread:
        overrides = dict(self.overrides)
        if port is not None:  # a restart keeps its port so clients find it again
            overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
        config = build_config(overrides, environ={})
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            self.broker = Broker(config)
            loop.run_until_complete(self.broker.start())
            started.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="broker", daemon=True)
        self._thread.start()
        if not started.wait(30):
            raise RuntimeError("broker did not start")
        assert self.broker is not None
        self.port = self.broker.port
        return self

    def call(self, coro_or_fn):
        """Run a coroutine (or a plain function) on the broker's loop and return its result."""
        assert self._loop is not None

        async def wrapper():
            result = coro_or_fn() if callable(coro_or_fn) else coro_or_fn
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(60)

    def stop(self) -> None:
        if self._loop is None:
            return
        assert self.broker is not None
        self.call(self.broker.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(30)
        self._loop.close()
        self._loop = None

    def restart(self) -> BrokerThread:
        port = self.port
        self.stop()
        return self.start(port=port)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    started: list[BrokerThread] = []

    def make(overrides: dict[str, str] | None = None, name: str = "broker") -> BrokerThread:
        b = BrokerThread(tmp_path / name, overrides).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def kafka_broker(broker_factory) -> BrokerThread:
    return broker_factory()


@pytest.fixture
async def async_broker(tmp_path: Path):
    """A broker on the test's own event loop (for raw-protocol tests that inspect its state)."""
    config = build_config(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}, environ={}
    )
    broker = Broker(config)
    await broker.start()
    yield broker
    await broker.stop()


async def until(condition, *, steps: int = 100_000) -> None:
    """Yield to the event loop until `condition()` holds (the broker runs on this same loop)."""
    for _ in range(steps):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")
