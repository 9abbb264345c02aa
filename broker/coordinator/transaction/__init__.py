"""Transactions (Kafka's kafka.coordinator.transaction): the transaction coordinator's state per
transactional id and the `__transaction_state` partitions it keeps them in.

May import: broker.coordinator.group (Java's hashCode, shared with it), broker.replication,
broker.metadata, broker.config, storage, protocol, timer.

The coordinator's modules (LAZY) are imported on first use, as attributes of this package
(PEP 562): importing any other module of it does not load the coordinator, which the
server builds when a request first needs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"transaction_coordinator", "transaction_marker_channel", "view"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
