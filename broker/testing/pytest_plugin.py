"""The kafka-sim pytest plugin (entry point `pytest11`): fixtures that start an embedded cluster.

Importing it costs nothing: the broker loads only when a test asks for a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from broker.testing.embedded_cluster import EmbeddedCluster

CLUSTER_MARKER = "kafka_cluster"
FAULT_MARKER = "kafka_fault"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{CLUSTER_MARKER}(brokers=1, properties=None): the kafka_cluster fixture's "
        "broker count and Kafka properties (e.g. {'num.partitions': 3})")
    config.addinivalue_line(
        "markers", f"{FAULT_MARKER}(broker=0, api='Produce', ...): a fault the kafka_cluster "
        "fixture injects before the test (ControlClient.add_fault's arguments)")


def _start(data_dir: Any, brokers: int, properties: dict[str, Any] | None) -> EmbeddedCluster:
    from broker.testing.embedded_cluster import EmbeddedCluster

    return EmbeddedCluster(data_dir, brokers, properties).start()


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[EmbeddedCluster]:
    """A fresh cluster for this test: `.bootstrap`, `.control` (a ControlClient), `.clock`."""
    marker = request.node.get_closest_marker(CLUSTER_MARKER)
    options = dict(marker.kwargs) if marker is not None else {}
    cluster = _start(tmp_path_factory.mktemp("kafka-sim"), options.pop("brokers", 1),
                     options.pop("properties", None))
    try:
        assert cluster.control is not None
        for fault in request.node.iter_markers(FAULT_MARKER):
            cluster.control.add_fault(**{"broker": 0, **fault.kwargs})
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_cluster_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """One single-broker cluster for the whole session (a test that freezes the clock or adds
    faults should resume and clear them)."""
    cluster = _start(tmp_path_factory.mktemp("kafka-sim-session"), 1, None)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka_cluster_factory(tmp_path_factory: pytest.TempPathFactory
                          ) -> Iterator[Callable[..., EmbeddedCluster]]:
    """`make(brokers=3, properties={...})` starts a cluster; all are stopped after the test."""
    started: list[EmbeddedCluster] = []

    def make(brokers: int = 1, properties: dict[str, Any] | None = None) -> EmbeddedCluster:
        cluster = _start(tmp_path_factory.mktemp("kafka-sim"), brokers, properties)
        started.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in started:
            cluster.stop()
