"""The kafka-sim pytest plugin (entry point `pytest11`): fixtures that start an embedded cluster.

Importing it costs nothing: the broker loads only when a test asks for a cluster. With
`@pytest.mark.kafka_cluster(faults=SEED)` the cluster meets the faults that seed schedules
(broker.control.fault_schedule.py) while the test runs, and a failing test's report says the
seed, to run it again under the same faults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from broker.control.fault_schedule import FaultSchedule
    from broker.testing.embedded_cluster import EmbeddedCluster

CLUSTER_MARKER = "kafka_cluster"
FAULT_MARKER = "kafka_fault"
SCHEDULE = pytest.StashKey["FaultSchedule"]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{CLUSTER_MARKER}(brokers=1, properties=None, faults=None, fault_kinds=None, "
        "fault_duration_s=30, faults_per_s=0.5): the kafka_cluster fixture's broker count and "
        "Kafka properties (e.g. {'num.partitions': 3}); faults=SEED (True: a random one) "
        "applies that seed's fault schedule while the test runs")
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
    brokers = options.pop("brokers", 1)
    cluster = _start(tmp_path_factory.mktemp("kafka-sim"), brokers,
                     options.pop("properties", None))
    runner = None
    try:
        assert cluster.control is not None
        for fault in request.node.iter_markers(FAULT_MARKER):
            cluster.control.add_fault(**{"broker": 0, **fault.kwargs})
        if options.get("faults") not in (None, False):
            from broker.control.fault_schedule import ScheduleRunner

            schedule = _schedule(options, brokers)
            request.node.stash[SCHEDULE] = schedule
            runner = ScheduleRunner(cluster.control, schedule).start()
        yield cluster
    finally:
        if runner is not None:
            runner.stop()
        cluster.stop()


def _schedule(options: dict[str, Any], brokers: int) -> FaultSchedule:
    import random

    from broker.control.fault_schedule import KINDS, FaultSchedule

    seed = options["faults"]
    if seed is True:
        seed = random.SystemRandom().randrange(2**32)
    return FaultSchedule.from_seed(
        int(seed), brokers=brokers, kinds=options.get("fault_kinds") or KINDS,
        duration_s=options.get("fault_duration_s", 30.0),
        faults_per_s=options.get("faults_per_s", 0.5))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failing test that ran under a fault schedule says its seed (and the schedule)."""
    outcome = yield
    report = outcome.get_result()
    schedule = item.stash.get(SCHEDULE, None)
    if report.failed and schedule is not None:
        report.sections.append(("kafka-sim faults", (
            f"this test ran under the faults of seed {schedule.seed}; run it again under them "
            f"with @pytest.mark.kafka_cluster(faults={schedule.seed}, ...)\n"
            f"{schedule.describe()}")))


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
