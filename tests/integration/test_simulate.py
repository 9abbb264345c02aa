"""`kafka-sim simulate` end to end: a run keeps Kafka's guarantees under seeded faults, the
same seed gives the same digest, a deliberately broken broker is caught (and its report renders
in chromium), shrinking finds the faults a failure needs, and --keep replays some of a seed's."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

from broker.simulation.command import smallest_failing
from broker.simulation.fault_plan import PlannedFault
from broker.simulation.report import write_report
from broker.simulation.simulator import simulate
from tests.browser import Browser

DEFECT = "high-watermark-ignores-isr"
# Broker 1 leads one partition of the workload's topic: cut from the other brokers, its followers
# fetch nothing more; then it crashes, before the cut has cost them their place in the ISR.
CUT_THEN_CRASH = [PlannedFault(5_000, "partition", 1, 10_000),
                  PlannedFault(8_000, "crash", 1, 10_000)]


def simulate_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.server.cli", "simulate", *args],
                          capture_output=True, text=True, timeout=300)


def digest(output: str) -> str:
    return re.search(r"digest ([0-9a-f]{16})", output).group(1)


async def test_a_broker_that_acknowledges_before_the_isr_has_the_records_loses_them(tmp_path):
    # its own loop, in a thread: this test's loop drives the browser
    broken = await asyncio.to_thread(simulate, 11, tmp_path / "broken", duration_ms=20_000,
                                     faults=CUT_THEN_CRASH, defect=DEFECT)
    assert broken.healed
    assert "lost-write" in {a.kind for a in broken.anomalies}
    lost = next(a for a in broken.anomalies if a.kind == "lost-write")
    shown = broken.history.around(lost.at_ms, lost.partition)
    assert {"fault"} <= {e.kind for e in shown}  # what led to it is printed with it
    report = tmp_path / "report.html"
    write_report(broken, report)
    async with Browser(tmp_path / "chromium") as browser:
        await browser.navigate(report.as_uri())
        assert await browser.evaluate("document.getElementById('digest').textContent") == \
            broken.digest
        assert await browser.evaluate("document.getElementById('verdict').textContent") == \
            f"{len(broken.anomalies)} anomalies"
        rows = await browser.evaluate("document.querySelectorAll('#anomalies tr').length")
        assert rows == min(len(broken.anomalies), 200)
        assert await browser.evaluate("document.querySelectorAll('rect.fault').length") == 2
        assert await browser.evaluate("document.querySelectorAll('line.anomaly').length") >= 3
        assert await browser.evaluate("document.querySelectorAll('polyline').length") == 3


def test_the_same_faults_on_a_correct_broker_lose_nothing(tmp_path):
    result = simulate(11, tmp_path / "correct", duration_ms=20_000, faults=CUT_THEN_CRASH)
    assert result.healed and result.anomalies == []
    counts = result.counts
    assert counts["ack"] > 100 and counts["read"] > 100 and counts["txn-commit"] > 10
    assert counts["fault"] == 2 and counts["commit"] > 10
    assert counts["keyed-records"] > 100 and counts["compacted-away"] > 0  # the cleaner ran
    members = {e.get("member") for e in result.history.of_kind("group-commit")}
    assert members == {"member-0", "member-1"}  # the group's partitions were shared out
    assert result.history.of_kind("broker-start")  # the crashed broker came back


def test_shrink_leaves_out_the_faults_the_failure_does_not_need(tmp_path):
    plan = [PlannedFault(3_000, "drop", 0, 1_000), *CUT_THEN_CRASH,
            PlannedFault(17_000, "session-expiry", 2)]
    runs = iter(range(100))

    def fails(trial: list[PlannedFault]) -> bool:
        return bool(simulate(11, tmp_path / f"run-{next(runs)}", duration_ms=20_000,
                             faults=trial, defect=DEFECT).anomalies)

    assert fails(plan)
    kept = smallest_failing(plan, fails)
    assert 2 in kept and 3 in kept and len(kept) < 4  # the cut and the crash
    assert fails([plan[n - 1] for n in kept])


def test_the_same_seed_gives_the_same_history(tmp_path):
    first, second = (simulate_cli("--seed", "5", "--duration", "20", "--report",
                                  str(tmp_path / f"{i}.html")) for i in range(2))
    assert first.returncode == second.returncode == 0, first.stderr
    assert digest(first.stdout) == digest(second.stdout)
    assert digest(first.stdout) in (tmp_path / "0.html").read_text()
    other = simulate_cli("--seed", "6", "--duration", "20")
    assert digest(other.stdout) != digest(first.stdout)


def test_keep_applies_the_named_faults_of_the_seeds_schedule():
    every = simulate_cli("--seed", "3", "--duration", "60", "--faults", "none")
    assert "faults: 0 planned" in every.stdout
    run = simulate_cli("--seed", "3", "--duration", "60", "--keep", "2,4")
    assert run.returncode == 0, run.stdout + run.stderr
    listed = re.findall(r"^ +(\d+)\. ", run.stdout, re.M)
    assert listed == ["2", "4"]


def test_a_bad_fault_kind_is_one_line_and_status_2():
    run = simulate_cli("--faults", "crash,flood")
    assert run.returncode == 2
    assert run.stderr.strip() == ("kafka-sim simulate: unknown fault kind flood (known: crash, "
                                  "power-loss, disk, partition, client-partition, delay, drop, "
                                  "session-expiry, controller-move)")


def test_folders_that_cannot_be_written_are_one_line_and_status_2(tmp_path):
    run = simulate_cli("--report", str(tmp_path / "missing" / "r.html"))
    assert run.returncode == 2
    assert run.stderr.strip() == (f"kafka-sim simulate: --report: no folder "
                                  f"{tmp_path / 'missing'} to write it in")
    (tmp_path / "a-file").write_text("")
    run = simulate_cli("--data-dir", str(tmp_path / "a-file"))
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert run.stderr.startswith("kafka-sim simulate: --data-dir: [Errno 20] Not a directory")
