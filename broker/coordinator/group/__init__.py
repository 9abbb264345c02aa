"""Consumer groups (Kafka's kafka.coordinator.group): the classic group protocol's coordinator and
the `__consumer_offsets` partitions it keeps groups and offsets in.

The coordinator, the groups' metadata and the control API's view (LAZY) load with the first
group request (`consumer_groups.coordinator`, PEP 562): the server builds the coordinator then.

May import: broker.replication (appends with acks=-1, reading its partitions), broker.metadata
(the metadata cache), broker.config, storage, protocol, timer.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"coordinator", "group_metadata", "view"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
