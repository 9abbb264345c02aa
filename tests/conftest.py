"""Test-wide set-up: readable broker logs at info level (debug logs every request), the cluster
fixtures from tests/harness.py, and one lock around ast.parse on CPython 3.11."""

from __future__ import annotations

import ast
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.server.cluster import Cluster
from broker.server.kafka_server import KafkaServer
from broker.server.log_setup import configure_logging
from broker.server.zookeeper_runner import INSTALL_HINT, ZooKeeperServer, is_installed
from tests.harness import BrokerThread, cluster_config

configure_logging("info", json=False)

# CPython 3.11 formats a traceback's carets with ast.parse, which keeps its recursion depth in
# interpreter-wide state: two threads formatting tracebacks at once (the suite's brokers run in
# threads beside the tests) can leave it wrong, and every later ast.parse in that process raises
# "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905; a CI run lost its
# pipeline tests to it). One lock keeps the calls apart; 3.12 needs none.
if sys.version_info < (3, 12):
    _parse, _parse_lock = ast.parse, threading.RLock()

    def _one_parse_at_a_time(*args, **kwargs):
        with _parse_lock:
            return _parse(*args, **kwargs)

    ast.parse = _one_parse_at_a_time


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    started: list[BrokerThread] = []

    def make(overrides: dict[str, str] | None = None, name: str = "cluster",
             brokers: int = 1, control: bool = False) -> BrokerThread:
        b = BrokerThread(tmp_path / name, overrides, brokers, control).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def kafka_broker(broker_factory, request: pytest.FixtureRequest) -> BrokerThread:
    """A one-broker cluster on a thread of its own (for synchronous clients), with the broker
    properties of a `@pytest.mark.broker_config({...})` marker, if the test has one."""
    marker = request.node.get_closest_marker("broker_config")
    return broker_factory(marker.args[0] if marker else None)


@pytest.fixture
async def async_broker(tmp_path: Path, request: pytest.FixtureRequest):
    """A one-broker cluster on the test's own event loop; yields its broker. Broker properties
    come from a `@pytest.mark.broker_config({...})` marker, if the test has one."""
    marker = request.node.get_closest_marker("broker_config")
    cluster = Cluster(cluster_config(tmp_path / "data", marker.args[0] if marker else None), 1)
    await cluster.start()
    broker: KafkaServer = cluster.brokers[0]
    await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
    yield broker
    await cluster.stop()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper (Debian's package) for the session; tests use chroots of their own."""
    if not is_installed():  # `make test` installs it; a plain pytest run says how, never skips
        pytest.fail(f"these tests need a real ZooKeeper: {INSTALL_HINT}", pytrace=False)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """`zookeeper.connect` with a chroot of this test's own."""
    return f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test` runs workers), tests that share an expensive session
    fixture stay on one worker: the pipeline's SparkSession (a JVM each) and the chaos runs."""
    for item in items:
        parts = Path(str(item.fspath)).parts
        if "pipeline" in parts or "chaos" in parts:
            item.add_marker(pytest.mark.xdist_group("spark"))
