"""Transactions (Kafka's kafka.coordinator.transaction): the transaction coordinator's state per
transactional id and the `__transaction_state` partitions it keeps them in.

The coordinator, its marker channel and the control API's view (LAZY) load with the first
transactional request (`transactions.transaction_coordinator`, PEP 562): the server builds
the coordinator then.

May import: broker.coordinator.group (Java's hashCode, shared with it), broker.replication,
broker.metadata, broker.config, storage, protocol, timer.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"transaction_coordinator", "transaction_marker_channel", "view"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
