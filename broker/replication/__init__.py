"""Replication (Kafka's kafka.server.ReplicaManager and kafka.cluster.Partition): partitions as
leader or follower, ISR and high watermark, follower fetchers and the LeaderEndpoint they fetch
through, and the delayed operations (DelayedProduce, DelayedFetch, DelayedDeleteRecords) parked in
purgatories on the timing wheel.

The data path (the modules in DATA_PATH, and the logs, segments and records they import) is what
a broker needs once it hosts a partition: each of these modules is imported on first use of it as
an attribute of this package (`replication.delayed_fetch`, PEP 562), so a broker with no
partition starts without them, and nothing else in the broker imports them lazily.

May import: broker.metadata, broker.config, storage, protocol, timer.
"""

from __future__ import annotations

import importlib
from types import ModuleType

DATA_PATH = frozenset({
    "partition", "delayed_fetch", "delayed_produce", "delayed_delete_records", "fetch_session",
    "fetch_session_handler", "leader_endpoint", "replica_fetcher", "replica_alter_log_dirs",
})


def __getattr__(name: str) -> ModuleType:
    if name in DATA_PATH:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
