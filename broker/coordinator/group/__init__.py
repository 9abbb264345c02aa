"""Consumer groups (Kafka's kafka.coordinator.group): the classic group protocol's coordinator and
the `__consumer_offsets` partitions it keeps groups and offsets in.

May import: broker.replication (appends with acks=-1, reading its partitions), broker.metadata
(the metadata cache), broker.config, storage, protocol, timer.

The coordinator's modules (LAZY) are imported on first use, as attributes of this package
(PEP 562): importing any other module of it does not load the coordinator, which the
server builds when a request first needs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"coordinator", "group_metadata", "view"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
