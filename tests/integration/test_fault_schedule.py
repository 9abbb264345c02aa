"""A seed's fault schedule applied to a real cluster through its control API: each fault is on
between its two steps (listed by the control API, or its broker stopped), and all is over at the
end; the pytest plugin's `faults=SEED` runs one under a user's test and names the seed when the
test fails; `kafka-sim ctl fault schedule` prints one."""

from __future__ import annotations

import pytest

from broker.control import ctl
from broker.control.fault_schedule import FaultSchedule, ScheduleRunner
from broker.testing.embedded_cluster import EmbeddedCluster
from tests.integration.test_pytest_plugin import PLUGIN_ARGS

pytest_plugins = ["pytester"]


def test_a_schedule_is_applied_step_by_step_and_ended(tmp_path):
    schedule = FaultSchedule.from_seed(0, brokers=3, duration_s=10, faults_per_s=1)
    kinds = {f.kind for f in schedule.faults}
    assert "restart" in kinds and kinds & {"delay", "error", "drop", "disconnect"}
    with EmbeddedCluster(tmp_path, brokers=3) as cluster:
        control = cluster.control
        assert control is not None
        seen: list[tuple[str, int, int]] = []

        def observe(line: str) -> None:  # the cluster as each step left it
            down = [b["id"] for b in control.brokers() if not b["alive"]]
            seen.append((line[:3].strip(), len(control.faults()), len(down)))

        runner = ScheduleRunner(control, schedule, on_step=observe)
        runner.run(wait=lambda seconds: False)  # every step at once, in order
        expected_on = 0
        for (state, faults, down), line in zip(seen, runner.steps, strict=True):
            on = state == "on"
            if "stopped" in line:
                assert down == (1 if on else 0), line
            else:
                expected_on += 1 if on else -1
            assert faults == expected_on, (line, faults)
        assert control.faults() == [] and all(b["alive"] for b in control.brokers())


def test_ctl_prints_a_seeds_schedule(capsys):
    assert ctl.main(["fault", "schedule", "--seed", "5", "--brokers", "3", "--duration", "10",
                     "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == FaultSchedule.from_seed(5, brokers=3, duration_s=10).describe()
    assert ctl.main(["fault", "schedule", "--seed", "5", "--brokers", "3",
                     "--kinds", "flood"]) == 2
    assert "fault kinds are among" in capsys.readouterr().err


@pytest.fixture
def pytester(pytester, monkeypatch):
    from tests.integration.test_pytest_plugin import ROOT
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return pytester


def test_a_failing_test_under_a_fault_schedule_names_its_seed(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.kafka_cluster(brokers=1, faults=1234, fault_duration_s=1, faults_per_s=20,
                                   fault_kinds=["delay"])
        def test_under_faults(kafka_cluster):
            assert False, "the application broke"
    """)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*kafka-sim faults*",
        "*this test ran under the faults of seed 1234*kafka_cluster(faults=1234*",
        "*fault schedule of seed 1234:*",
        "*broker 0: * delayed * ms"])
