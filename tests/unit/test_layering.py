"""Imports point down the layers: broker -> storage -> protocol, broker -> timer; timer imports
nothing of ours; protocol, storage and timer never import broker or asyncio networking."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"broker", "protocol", "storage", "timer", "pipeline"}
ALLOWED = {
    "protocol": set(),
    "timer": set(),
    "storage": {"protocol"},
    "broker": {"protocol", "storage", "timer"},
    "pipeline": {"protocol", "storage"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


# The console script dispatches `kafka-sim pipeline ...` to the optional Spark jobs; nothing else
# in broker/ may reach up into pipeline/.
EXCEPTIONS = {"broker/cli.py": {"pipeline"}}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down(package):
    for path in (ROOT / package).rglob("*.py"):
        imported = imported_packages(path)
        ours = (imported & OURS) - {package} - EXCEPTIONS.get(str(path.relative_to(ROOT)), set())
        assert ours <= ALLOWED[package], f"{path.relative_to(ROOT)} imports {ours - ALLOWED[package]}"
        if package in ("protocol", "storage"):
            assert "asyncio" not in imported, f"{path.relative_to(ROOT)} imports asyncio"
