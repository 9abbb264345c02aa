"""Start-up imports much of the broker only where first used, and names needed only by annotations
are imported under `if TYPE_CHECKING:`. A name imported there but used when the code runs is a
NameError waiting for its first request: this test finds every such use, in every module of ours."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "protocol", "storage", "timer", "pipeline")


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"


def _imported(node: ast.AST) -> set[str]:
    return {(a.asname or a.name).split(".")[0] for n in ast.walk(node)
            if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}


def _annotation_nodes(tree: ast.AST) -> set[int]:
    """Every node inside an annotation (lazy strings under `from __future__ import annotations`)."""
    annotations: list[ast.AST | None] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = n.args
            annotations.append(n.returns)
            annotations += [a.annotation for a in (*arguments.posonlyargs, *arguments.args,
                                                    *arguments.kwonlyargs, arguments.vararg,
                                                    arguments.kwarg) if a is not None]
        elif isinstance(n, ast.AnnAssign):
            annotations.append(n.annotation)
    return {id(sub) for a in annotations if a is not None for sub in ast.walk(a)}


def _function_locals(function: ast.AST) -> set[str]:
    """What a function binds itself: its own imports, assignments and arguments."""
    names = _imported(function)
    for n in ast.walk(function):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
    return names


def runtime_uses_of_type_checking_names(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text())
    only_for_types = set()
    for node in tree.body:
        if _is_type_checking_block(node):
            only_for_types |= _imported(node)
    if not only_for_types:
        return []
    in_annotations = _annotation_nodes(tree)
    found: list[str] = []

    def visit(node: ast.AST, bound: set[str]) -> None:
        if _is_type_checking_block(node):
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            bound = bound | _function_locals(node)
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                and node.id in only_for_types and node.id not in bound
                and id(node) not in in_annotations):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {node.id}")
        for child in ast.iter_child_nodes(node):
            visit(child, bound)

    visit(tree, set())
    return found


def test_no_name_imported_for_type_checking_is_used_at_run_time():
    found = [use for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             for use in runtime_uses_of_type_checking_names(path)]
    assert found == []


def test_the_check_finds_a_run_time_use(tmp_path):
    """The check itself: a TYPE_CHECKING name called in a function body is reported, one used in
    annotations or re-imported locally is not."""
    module = tmp_path / "module.py"
    module.write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from storage.log import Log\n"
        "def typed(log: Log) -> Log:\n"
        "    return log\n"
        "def local() -> None:\n"
        "    from storage.log import Log\n"
        "    Log.open\n"
        "def broken() -> None:\n"
        "    Log.open\n")
    assert runtime_uses_of_type_checking_names(module, tmp_path) == ["module.py:11: Log"]
