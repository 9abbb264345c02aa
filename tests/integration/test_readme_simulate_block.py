"""The README's simulator block runs as written, through the venv's `kafka-sim` console script,
in an empty folder: its five seeds are the ones CI holds to no anomaly, and its seed 5 with the
deliberate defect is caught, shrunk to a schedule whose printed replay fails again, and drawn."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.docs import section

KAFKA_SIM = Path(sys.executable).parent / "kafka-sim"


def commands() -> list[list[str]]:
    block = re.search(r"```sh\n(.*?)```", section("README.md", "## One seed, one history: the "
                                                               "simulator"), re.S)
    assert block is not None
    lines = [shlex.split(line, comments=True) for line in block.group(1).splitlines()
             if line.strip()]
    assert all(argv[:2] == [".venv/bin/kafka-sim", "simulate"] for argv in lines)
    return [[str(KAFKA_SIM), *argv[1:]] for argv in lines]


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_readme_simulator_block(tmp_path):
    seeds, defect = commands()
    clean = run(seeds, tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "5 seeds, 0 with anomalies" in clean.stdout

    caught = run(defect, tmp_path)
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "lost-write at" in caught.stdout
    assert "smallest failing schedule: faults" in caught.stdout
    assert (tmp_path / "seed-5.html").read_text().count("<svg") == 3
    replay = caught.stdout.rstrip().splitlines()[-2]  # the shrink's replay; then the report line
    assert replay.startswith("  replay: kafka-sim simulate --seed 5 ") and "--keep" in replay
    again = run([str(KAFKA_SIM), *shlex.split(replay.split("kafka-sim", 1)[1])], tmp_path)
    assert again.returncode == 1 and "lost-write at" in again.stdout
