"""The pytest plugin, as a user's suite meets it: pytester runs small test files that use the
fixtures with kafka-python over real TCP — the README's session-timeout example as written, the
markers (brokers, properties, faults), the session and factory fixtures — and the package
declares the plugin as a `pytest11` entry point."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

from tests.docs import section

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Testing with the fixture and the clock"
PLUGIN = "broker.testing.pytest_plugin"
# The installed entry point may or may not be this checkout's: block it, load this one by name.
PLUGIN_ARGS = ("-p", "no:kafka_sim", "-p", PLUGIN, "-p", "no:cacheprovider")


@pytest.fixture
def pytester(pytester, monkeypatch):
    """A user's pytest in its own process (as theirs would be), importing this checkout."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return pytester


def readme_test_file() -> str:
    block = re.search(r"```python\n(.*?)```", section("README.md", SECTION), re.S)
    assert block is not None, "no ```python block in the README's testing section"
    return block.group(1)


def test_the_readme_session_timeout_example_passes_in_milliseconds(pytester):
    pytester.makepyfile(test_billing=readme_test_file())
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--durations=0", "-vv")
    result.assert_outcomes(passed=1)
    # The call phase (setup starts the cluster) crossed 45 s of session timeout in real seconds.
    durations = [float(m.group(1)) for line in result.outlines
                 if (m := re.match(r"([\d.]+)s call ", line))]
    assert durations and durations[0] < 10.0


USER_SUITE = '''
import pytest

from tests.docs import section
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

SEEN = []


@pytest.mark.kafka_cluster(brokers=3, properties={"num.partitions": 3,
                                                  "auto.leader.rebalance.enable": False})
def test_three_brokers_with_properties(kafka_cluster):
    assert len(kafka_cluster.bootstrap.split(",")) == 3
    assert [b["alive"] for b in kafka_cluster.control.brokers()] == [True] * 3
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap)
    producer.send("t", b"v", partition=2).get(10)
    producer.close()
    assert len(kafka_cluster.control.partitions("t")) == 3
    consumer = KafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("t", 2)])
    assert next(consumer).value == b"v"
    consumer.close()


@pytest.mark.kafka_fault(api="Metadata", error="CLUSTER_AUTHORIZATION_FAILED", count=7)
def test_a_fault_marker_arms_the_fault(kafka_cluster):
    (fault,) = kafka_cluster.control.faults()
    assert (fault["broker"], fault["api"], fault["remaining"]) == (0, "Metadata", 7)


def test_the_clock_starts_running_on_a_fresh_cluster(kafka_cluster):
    state = kafka_cluster.clock.state()
    assert not state["frozen"] and state["brokers"] == [0]
    assert kafka_cluster.clock.freeze()["frozen"]


def test_session_cluster_first(kafka_cluster_session):
    SEEN.append(kafka_cluster_session.bootstrap)


def test_session_cluster_second(kafka_cluster_session):
    assert SEEN == [kafka_cluster_session.bootstrap]


def test_factory_starts_separate_clusters(kafka_cluster_factory):
    one, two = kafka_cluster_factory(), kafka_cluster_factory(properties={"num.partitions": 2})
    assert one.bootstrap != two.bootstrap
    producer = KafkaProducer(bootstrap_servers=two.bootstrap)
    producer.send("auto", b"x").get(10)
    producer.close()
    assert len(two.control.partitions("auto")) == 2
'''


def test_a_user_suite_uses_the_fixtures_and_markers(pytester):
    # A failing test fails as it should, and its cluster still stops (the run ends).
    failing = "\n\ndef test_fails(kafka_cluster):\n    assert kafka_cluster.control.brokers() == []\n"
    pytester.makepyfile(test_user_suite=USER_SUITE + failing)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--strict-markers")
    result.assert_outcomes(passed=6, failed=1)


def test_the_package_declares_the_plugin_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"kafka_sim": PLUGIN}
    installed = [e for e in importlib.metadata.entry_points(group="pytest11")
                 if e.name == "kafka_sim"]
    assert installed, "no pytest11 entry point installed: reinstall (make test does it)"
    assert installed[0].value == PLUGIN
