"""What the admin view and the tests see of a purgatory: its watcher lists and counters (the
purgatory's own class keeps only what parking and completing operations needs)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from broker.replication.purgatory import DelayedOperationPurgatory


def watched(purgatory: DelayedOperationPurgatory, key: Hashable) -> int:
    """Operations in `key`'s watcher list (completed ones count until purged)."""
    return len(purgatory.watchers.get(key, ()))


def num_watched(purgatory: DelayedOperationPurgatory) -> int:
    """Watcher-list entries over all keys (an op watched on three keys counts three times)."""
    return sum(len(ops) for ops in purgatory.watchers.values())


def stats(purgatory: DelayedOperationPurgatory) -> dict[str, Any]:
    """The purgatory as the control API's /stats shows it."""
    return {
        "name": purgatory.name,
        "delayed": purgatory.delayed,
        "watched": num_watched(purgatory),
        "keys": len(purgatory.watchers),
        "completed": purgatory.completed_count,
        "expired": purgatory.expired_count,
        "purged": purgatory.purged_count,
        "purge_runs": purgatory.purge_runs,
        "purge_interval": purgatory.purge_interval,
    }
