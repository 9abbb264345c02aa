"""`kafka-sim pipeline` without the pipeline extra: one line of advice and status 2, no traceback.

The extra is installed in the test environment, so each run hides it for real in a fresh
interpreter: a `None` entry in sys.modules makes `import pyspark` raise ImportError, as a base
install (`make run`) would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import EXTRA_MODULES, missing_modules

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run_without(modules: tuple[str, ...], call: str, argv: list[str]) -> subprocess.CompletedProcess:
    """Run `call(argv)` (e.g. pipeline.cli.main) in a new interpreter where `modules` cannot be imported."""
    module, _, function = call.rpartition(".")
    script = (
        "import sys\n"
        f"for name in {modules!r}:\n"
        "    sys.modules[name] = None\n"
        f"from {module} import {function}\n"
        f"sys.exit({function}({argv!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _assert_advice(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert "make pipeline" in lines[0] and "pip install -e '.[pipeline]'" in lines[0]
    assert result.stdout == ""
    return lines[0]


@pytest.mark.parametrize("call", ["pipeline.cli.main", "broker.server.cli.main"])
@pytest.mark.parametrize("command", ["audit", "stats"])
def test_without_pyspark_one_line_and_status_2(call, command, tmp_path):
    argv = [command, "--data-dir", str(tmp_path), "--out", str(tmp_path / "out")]
    if call == "broker.server.cli.main":  # the installed `kafka-sim` entry point dispatches here
        argv = ["pipeline", *argv]
    line = _assert_advice(_run_without(("pyspark",), call, argv))
    assert line.startswith("pipeline: PySpark is not installed")
    assert not (tmp_path / "out").exists()  # nothing ran


def test_base_install_without_any_of_the_extra():
    result = _run_without(EXTRA_MODULES, "pipeline.cli.main", ["audit", "--data-dir", "x"])
    line = _assert_advice(result)
    assert all(name in line for name in EXTRA_MODULES)


def test_missing_plotting_library_is_named():
    result = _run_without(("matplotlib",), "pipeline.cli.main", ["stats", "--data-dir", "x"])
    line = _assert_advice(result)
    assert "missing matplotlib" in line and "PySpark" not in line


def test_help_still_works_without_pyspark():
    result = _run_without(("pyspark",), "broker.server.cli.main", ["pipeline", "--help"])
    assert result.returncode == 0, result.stderr
    assert "audit" in result.stdout and "stats" in result.stdout
    result = _run_without(("pyspark",), "pipeline.cli.main", ["audit", "--help"])
    assert result.returncode == 0 and "--data-dir" in result.stdout


def test_missing_modules_sees_none_entries(monkeypatch):
    assert missing_modules() == []  # the extra is installed here
    monkeypatch.setitem(sys.modules, "pandas", None)
    assert missing_modules() == ["pandas"]
    assert missing_modules(("no_such_module_here", "sys")) == ["no_such_module_here"]
