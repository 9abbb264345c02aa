"""Test-wide set-up: readable broker logs at info level (debug logs every request), the cluster
fixtures from tests/harness.py, and one lock around compiling to an AST on CPython 3.11."""

from __future__ import annotations

import ast
import builtins
import gc
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

# CPython 3.11 keeps the recursion depth of its AST conversion in interpreter-wide state. Two
# conversions at once leave it wrong, and every later parse in that process raises "SystemError:
# AST constructor recursion depth mismatch" (CPython gh-106905): two threads (the suite's brokers
# run in threads beside the tests), or one conversion inside another in the same thread (the
# garbage collector, run by an allocation of pytest's assertion rewriting, frees an aiokafka
# future whose unretrieved error is logged, and the traceback's carets are found with
# ast.parse). So every compile to or from an AST holds one lock, with the collector off;
# 3.12 needs none.
if sys.version_info < (3, 12):
    _compile, _ast_lock = builtins.compile, threading.RLock()  # (a hang would be worse)

    def _one_ast_at_a_time(source, filename, mode, flags=0, *args, **kwargs):
        if not (flags & ast.PyCF_ONLY_AST or isinstance(source, ast.AST)):
            return _compile(source, filename, mode, flags, *args, **kwargs)
        with _ast_lock:
            collecting = gc.isenabled()
            gc.disable()
            try:
                return _compile(source, filename, mode, flags, *args, **kwargs)
            finally:
                if collecting:
                    gc.enable()

    builtins.compile = _one_ast_at_a_time


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
