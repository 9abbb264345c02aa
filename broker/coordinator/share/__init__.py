"""The share coordinator (Kafka 4's share-coordinator module): the durable state of share
partitions, kept in `__share_group_state` by the leaders of its partitions. A share partition's
leader (broker/share/) reads its state when it starts the share partition and writes it as
records change, with ReadShareGroupState and WriteShareGroupState.

The coordinator loads with the first share-state request (`share.share_coordinator`, PEP 562).

May import: broker.replication (appends with acks=-1, reading its partitions), broker.metadata,
broker.config, broker.coordinator.group (the key hash Kafka uses for both), storage, protocol,
timer.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"share_coordinator"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
