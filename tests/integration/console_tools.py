"""Running `kafka-sim <tool>` as a user does: the venv's console script in a subprocess, against
this checkout's code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KAFKA_SIM = Path(sys.executable).parent / "kafka-sim"  # the venv's console script, not a module


def kafka_sim(*argv: str, stdin: str | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_SIM), *argv], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


class Tools:
    """The tools pointed at one cluster; `ok` expects success, `fails` a one-line error."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def run(self, tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return kafka_sim(tool, "--bootstrap-server", self.bootstrap, *args, stdin=stdin)

    def ok(self, tool: str, *args: str, stdin: str | None = None) -> str:
        done = self.run(tool, *args, stdin=stdin)
        assert done.returncode == 0, f"{tool} {args}: {done.returncode}\n{done.stdout}{done.stderr}"
        return done.stdout

    def fails(self, tool: str, *args: str, code: int = 1, stdin: str | None = None) -> str:
        return one_line_error(self.run(tool, *args, stdin=stdin), tool, code)


def one_line_error(done: subprocess.CompletedProcess, tool: str, code: int = 1) -> str:
    """The single `kafka-sim <tool>: ...` line a failed tool prints (never a traceback)."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kafka-sim {tool}: "), done.stderr
    return lines[0]


def columns(text: str) -> list[dict[str, str]]:
    """Rows of a kafka-consumer-groups.sh table (space-separated columns, '-' for none)."""
    lines = [line for line in text.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    header = lines[start].replace("COORDINATOR (ID)", "COORDINATOR")
    names = header.split()
    rows = []
    for line in lines[start + 1:]:
        cells = line.replace(" (", "(").split()
        rows.append(dict(zip(names, cells, strict=True)))
    return rows
