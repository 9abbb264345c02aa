"""Share groups' records (Kafka's kafka.server.share): the share partitions a partition's leader
keeps for each share group reading it, the share sessions of its consumers, and the delayed share
fetches parked in their purgatory. The groups' membership is the group coordinator's.

The manager loads with the first ShareFetch (`share.share_partition_manager`, PEP 562).

May import: broker.replication (reading the leaders' logs), broker.metadata, broker.config,
protocol, timer.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"share_partition_manager", "share_state_persister", "view"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
