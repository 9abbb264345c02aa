"""The handler table (broker/handlers/__init__.py) against the modules it names: each module, once
imported, registers exactly its table entry's API, so ApiVersions (read from the table, with no
handler imported) advertises what the modules serve; and a handler is loaded by first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# In a fresh interpreter: import each handler's module alone and see which entries got a coroutine.
EACH_MODULE_REGISTERS = """
import importlib, json
from broker.handlers import HANDLERS
found = {}
for key, handler in sorted(HANDLERS.items()):
    before = {k for k, h in HANDLERS.items() if h.registered is not None}
    importlib.import_module(f"broker.handlers.{handler.module}")
    after = {k for k, h in HANDLERS.items() if h.registered is not None}
    found[key] = sorted(after - before)
print(json.dumps(found))
"""

FIRST_USE_LOADS = """
import json, sys
from broker.handlers import HANDLERS
handler = HANDLERS[0]
before = "broker.handlers.produce" in sys.modules
handle = handler.handle
print(json.dumps([before, "broker.handlers.produce" in sys.modules, handle.__module__]))
"""


def run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_each_module_registers_exactly_its_table_entry():
    found = json.loads(run_python(EACH_MODULE_REGISTERS))
    # An entry may have been registered by an earlier module only if it is its own module too.
    assert {int(k): v for k, v in found.items() if v != [int(k)]} == {}


def test_a_handler_module_is_imported_by_its_first_use():
    assert json.loads(run_python(FIRST_USE_LOADS)) == [False, True, "broker.handlers.produce"]
