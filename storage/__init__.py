"""Segmented partition logs on disk: segments, offset/time indexes, checkpoints, and the log
manager.

A log's own modules (LAZY: the log with its segments and records, and the log cleaner) are
imported on first use as attributes of this package (`storage.log`, PEP 562): a broker with no
log yet, or no compacted one, starts without them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"log", "log_cleaner"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
