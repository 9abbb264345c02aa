"""EmbeddedCluster: a kafka-sim cluster on its own event loop in a thread, for a test suite's clients.

Blocking clients (kafka-python, confluent-kafka) and the test itself reach it over real TCP: the
brokers on ephemeral ports, the control API on another, the data in a directory the caller owns.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.config import build_config
from broker.control.control_client import ControlClient
from broker.control.control_server import ControlServer
from broker.server.cluster import Cluster

START_TIMEOUT_S = 60.0
# What a test cluster changes from Kafka's defaults: a group's first rebalance does not wait 3 s
# for more members (Kafka's own test harness does the same).
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


class ClusterClock:
    """The cluster's virtual clock, through the control API: every broker timeout follows it."""

    def __init__(self, control: ControlClient) -> None:
        self._control = control

    def freeze(self) -> dict:
        """Stop time: purgatory deadlines, sessions, transaction timeouts wait for `advance`."""
        return self._control.freeze_clock()

    def advance(self, ms: int) -> dict:
        """Move time `ms` forward; what came due has fired when this returns."""
        return self._control.advance_clock(ms)

    def resume(self) -> dict:
        """Let time run again from where it stands (it never goes back)."""
        return self._control.resume_clock()

    def state(self) -> dict:
        """frozen, now_ms, wall_ms, offset_ms (ahead of real time), brokers."""
        return self._control.clock()


class EmbeddedCluster:
    """`brokers` brokers sharing one clock, with Kafka properties applied to each of them."""

    def __init__(self, data_dir: Path, brokers: int = 1,
                 properties: Mapping[str, Any] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.num_brokers = brokers
        self.properties = {**TEST_DEFAULTS,
                           **{k: str(v).lower() if isinstance(v, bool) else str(v)
                              for k, v in (properties or {}).items()}}
        self.cluster: Cluster | None = None
        self._server: ControlServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.control: ControlClient | None = None
        self.clock: ClusterClock | None = None

    @property
    def bootstrap(self) -> str:
        """The bootstrap string of the running brokers ("127.0.0.1:port,...")."""
        assert self.cluster is not None, "the cluster is not started"
        return self.cluster.bootstrap_servers

    def start(self) -> EmbeddedCluster:
        config = build_config({**self.properties, "listeners": "PLAINTEXT://127.0.0.1:0",
                               "log.dirs": str(self.data_dir), "control.listener": ""},
                              environ={})
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self.cluster = Cluster(config, self.num_brokers)
                loop.run_until_complete(self.cluster.start())
                self._server = ControlServer(self.cluster, "127.0.0.1", 0)
                loop.run_until_complete(self._server.start())
                loop.run_until_complete(self._wait_for_controller())
            except BaseException as exc:  # surface start-up failures in the caller's thread
                failure.append(exc)
            started.set()
            if not failure:
                loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="kafka-sim-cluster", daemon=True)
        self._thread.start()
        if not started.wait(START_TIMEOUT_S):
            raise RuntimeError("the kafka-sim cluster did not start")
        if failure:
            self._loop = None
            loop.close()
            raise failure[0]
        assert self._server is not None
        self.control = ControlClient(self._server.url)
        self.clock = ClusterClock(self.control)
        return self

    async def _wait_for_controller(self) -> None:
        assert self.cluster is not None
        for broker in self.cluster.brokers.values():
            await broker.metadata_cache.wait_for(
                lambda s: s.controller_id >= 0 and len(s.brokers) == self.num_brokers,
                int(START_TIMEOUT_S * 1000))

    def call(self, fn: Any) -> Any:
        """Run a function or coroutine function on the cluster's loop and return its result."""
        assert self._loop is not None

        async def wrapper() -> Any:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(START_TIMEOUT_S)

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        assert self.cluster is not None
        if self._server is not None:
            self.call(self._server.stop)
        self.call(self.cluster.stop)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(START_TIMEOUT_S)
        loop.close()
        self._loop = None

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
