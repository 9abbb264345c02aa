"""The import graph: no cycle between any two of our modules (TYPE_CHECKING imports count), and
every import points down the layers — between the top-level packages and between broker's own
packages, as docs/architecture.md draws them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("broker", "protocol", "storage", "timer", "pipeline")
ALLOWED = {
    "protocol": set(),
    "timer": set(),
    "storage": {"protocol"},
    "broker": {"protocol", "storage", "timer"},
    "pipeline": {"protocol", "storage"},
}
# broker's packages, each with the packages of broker it may import (its own is always allowed).
BROKER_ALLOWED = {
    "logs": set(),  # the loggers: every package may import it (EVERY_PACKAGE_MAY_IMPORT)
    "config": set(),
    "metadata": {"config"},
    "control": set(),
    "tools": {"config"},
    "replication": {"config", "metadata"},
    "controller": {"config", "metadata"},
    "admin": {"config", "metadata"},
    "authorizer": {"config", "metadata"},
    "coordinator": {"config", "metadata", "replication"},
    "share": {"config", "metadata", "replication"},
    "handlers": {"config", "metadata", "replication", "controller", "admin", "coordinator",
                 "authorizer", "security", "quota", "share"},
    "interbroker": {"config", "metadata", "replication", "controller", "coordinator", "security"},
    "security": {"config", "metadata"},
    "quota": {"config", "metadata"},
    "network": {"config", "handlers", "control", "security", "quota"},
    "server": {"config", "metadata", "replication", "controller", "admin", "coordinator",
               "share", "handlers", "network", "control", "interbroker", "authorizer", "security",
               "quota", "tools"},
    "testing": {"config", "control", "server"},
    "simulation": {"config", "metadata", "server", "interbroker"},
}
EVERY_PACKAGE_MAY_IMPORT = {"logs"}
# The console script dispatches `kafka-sim pipeline ...` to the optional Spark jobs and
# `kafka-sim simulate ...` to the simulation (which runs a cluster of its own); nothing else in
# broker/ may reach up into pipeline/ or simulation/.
EXCEPTIONS = {"broker/server/cli.py": {"pipeline", "simulation"}}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for package in OURS for p in (ROOT / package).rglob("*.py")}


def _resolve(name: str) -> str | None:
    """The module of ours that importing `name` loads (a module, or its closest package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """Every module of ours that `module` imports, anywhere in it (TYPE_CHECKING blocks and
    function bodies included): `from a.b import c` counts a.b.c when c is a module, else a.b.
    A package's module loaded on first use (`replication.delayed_fetch`, the package's LAZY)
    counts where it is used as an attribute of the package's imported name."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    packages = _imported_packages(tree)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in packages
                and (lazy := f"{packages[node.value.id]}.{node.attr}") in MODULES):
            found.add(lazy)
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]
        else:
            continue
        found.update(r for t in targets if (r := _resolve(t)) is not None)
    found.discard(module)
    return found


def _imported_packages(tree: ast.Module) -> dict[str, str]:
    """Names bound to packages of ours: `import storage`, `from broker import replication`."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((a.asname, a.name) if a.asname else (a.name.partition(".")[0],) * 2
                         for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            bound.update((a.asname or a.name, f"{node.module}.{a.name}") for a in node.names)
    return {name: package for name, package in bound.items()
            if MODULES.get(package, ROOT).name == "__init__.py"}


GRAPH = {m: imports_of(m) for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def test_a_lazy_module_counts_where_its_package_attribute_is_used():
    assert "broker.replication.delayed_fetch" in GRAPH["broker.replication.replica_manager"]
    assert "storage.log" in GRAPH["storage.log_manager"]
    assert "broker.coordinator.group.coordinator" in GRAPH["broker.server.kafka_server"]


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def _top(module: str) -> str:
    return module.split(".")[0]


def _broker_package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_down(package):
    for module in (m for m in MODULES if _top(m) == package):
        rel = str(MODULES[module].relative_to(ROOT))
        imported = {_top(m) for m in GRAPH[module]} - {package} - EXCEPTIONS.get(rel, set())
        assert imported <= ALLOWED[package], f"{rel} imports {imported - ALLOWED[package]}"
        if package in ("protocol", "storage"):
            assert "asyncio" not in _stdlib_imports(module), f"{rel} imports asyncio"


def _stdlib_imports(module: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_every_broker_package_has_a_place_in_the_layers():
    packages = {_broker_package(m) for m in MODULES if _top(m) == "broker"} - {""}
    assert packages == set(BROKER_ALLOWED)


@pytest.mark.parametrize("package", sorted(BROKER_ALLOWED))
def test_broker_packages_import_down(package):
    for module in (m for m in MODULES if _top(m) == "broker" and _broker_package(m) == package):
        rel = str(MODULES[module].relative_to(ROOT))
        imported = ({_broker_package(m) for m in GRAPH[module] if _top(m) == "broker"}
                    - {package} - EXCEPTIONS.get(rel, set()))
        allowed = BROKER_ALLOWED[package] | EVERY_PACKAGE_MAY_IMPORT
        assert imported <= allowed, f"{MODULES[module].relative_to(ROOT)} imports {imported - allowed}"


# Entry points that import what a subcommand or fixture runs only when it runs: the console
# scripts (`kafka-sim ctl` loads no broker, `kafka-sim pipeline --help` no Spark), the pytest
# plugin (a test run without the fixture starts no cluster), and the Spark data source, whose
# reader runs in Spark's Python workers (PySpark's data sources import there). Everywhere else
# laziness goes through a package's LAZY (see imports_of).
LAZY_ENTRY_POINTS = {"broker/server/cli.py", "broker/testing/pytest_plugin.py", "pipeline/cli.py",
                     "pipeline/source.py"}


def test_no_function_imports_a_module_of_ours():
    found = []
    for path in MODULES.values():
        rel = str(path.relative_to(ROOT))
        if rel in LAZY_ENTRY_POINTS:
            continue
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{rel}:{node.lineno} {name}" for name in names
                          if _top(name) in OURS or isinstance(node, ast.ImportFrom) and node.level]
    assert found == []
