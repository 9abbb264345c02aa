"""Test harness: a real embedded cluster on ephemeral loopback ports with temporary data.

`BrokerThread` runs a cluster on its own event loop in a thread, so blocking clients
(kafka-python, confluent-kafka) and asyncio clients (aiokafka, in the test's loop) talk to it
over real TCP. `async_broker` runs a one-broker cluster on the test's own loop, for raw-protocol
tests that look at the broker's state between steps.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from pathlib import Path

from broker.config import build_config
from broker.control.control_server import ControlServer
from broker.server.cluster import Cluster


def cluster_config(data_dir: Path, overrides: dict[str, str] | None = None):
    return build_config({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir),
                         "control.listener": "", **(overrides or {})}, environ={})


class BrokerThread:
    """A cluster in a background thread; stop/start/restart keep its data and ports."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None,
                 brokers: int = 1, control: bool = False) -> None:
        self.with_control = control
        self.control: ControlServer | None = None
        self.root = data_dir
        self.overrides = overrides or {}
        self.num_brokers = brokers
        self.cluster: Cluster | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ports: dict[int, int] = {}

    @property
    def data_dir(self) -> Path:
        """Broker 0's data directory (its partition folders)."""
        return self.log_dir(0)

    def log_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    @property
    def bootstrap(self) -> str:
        assert self.cluster is not None
        return self.cluster.bootstrap_servers

    @property
    def port(self) -> int:
        return self._ports[0]

    def start(self) -> BrokerThread:
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self.cluster = Cluster(cluster_config(self.root, self.overrides), self.num_brokers)
                for broker_id, port in self._ports.items():  # a restart keeps the ports
                    config = self.cluster.configs[broker_id]
                    self.cluster.configs[broker_id] = config.with_overrides(
                        {"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
                loop.run_until_complete(self.cluster.start())
                if self.with_control:
                    self.control = ControlServer(self.cluster, "127.0.0.1", 0)
                    loop.run_until_complete(self.control.start())
            except BaseException as exc:  # surface start-up failures in the test
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="cluster", daemon=True)
        self._thread.start()
        if not started.wait(60):
            raise RuntimeError("cluster did not start")
        if failure:
            raise failure[0]
        assert self.cluster is not None
        self._ports = {b.broker_id: b.port for b in self.cluster.brokers.values()}
        self.call(self.wait_for_controller)
        return self

    async def wait_for_controller(self) -> None:
        """Every broker has heard from the controller (Metadata names it)."""
        assert self.cluster is not None
        for broker in self.cluster.brokers.values():
            await broker.metadata_cache.wait_for(
                lambda s: s.controller_id >= 0 and len(s.brokers) == self.num_brokers, 30_000)

    def call(self, coro_or_fn):
        """Run a coroutine function (or a plain function) on the cluster's loop; return its result."""
        assert self._loop is not None

        async def wrapper():
            result = coro_or_fn()
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(60)

    def stop(self) -> None:
        if self._loop is None:
            return
        assert self.cluster is not None
        if self.control is not None:
            self.call(self.control.stop)
        self.call(self.cluster.stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(30)
        self._loop.close()
        self._loop = None

    def restart(self) -> BrokerThread:
        self.stop()
        return self.start()


async def until(condition, *, steps: int = 100_000, timeout_s: float = 30.0) -> None:
    """Yield to the event loop until `condition()` holds (the broker runs on this same loop);
    `condition` may be a coroutine function (one that reads the metadata store).

    Most conditions hold within a few turns of the loop. One that also waits on a worker thread
    (a store flush, an fsync, a log loaded off the loop) may need wall time on a loaded machine:
    after `steps` turns it is polled every millisecond up to `timeout_s`."""

    async def holds() -> bool:
        result = condition()
        return bool(await result if inspect.isawaitable(result) else result)

    for _ in range(steps):
        if await holds():
            return
        await asyncio.sleep(0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await holds():
            return
        await asyncio.sleep(0.001)  # a worker thread's turn: there is nothing to await
    raise AssertionError("condition never became true")


async def watches_settled(timeout_s: float = 30.0) -> None:
    """Until no watch recipe of this loop (broker/metadata/recipes.py, tasks named "watch <path>")
    has a read under way: every change the store has told them of has reached their fn. The
    embedded store fires a watch inside the write, so what a test wrote before awaiting this is
    seen; a recipe that reads again meanwhile is waited for too."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks()
                 if t is not current and t.get_name().startswith("watch ") and not t.done()]
        if not tasks:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"watch recipes still reading: {[t.get_name() for t in tasks]}")
        await asyncio.wait(tasks, timeout=remaining)


async def led_here(broker, topic: str, partition: int = 0) -> None:
    """Until `broker` leads the partition itself. Its metadata cache may name it leader first: the
    controller hands over UpdateMetadata at once and LeaderAndIsr once its store write is durable."""
    await broker.metadata_cache.wait_for(
        lambda s: (p := s.partitions.get((topic, partition))) is not None
        and p.leader == broker.broker_id, 30_000)
    await until(lambda: (p := broker.replica_manager.partitions.get((topic, partition))) is not None
                and p.is_leader)


def read_all(bootstrap: str, topic: str, partition: int = 0) -> list[bytes]:
    """Every value in a partition, read with kafka-python from the earliest offset."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(topic, partition)])
    values = [r.value for r in consumer]
    consumer.close()
    return values
