"""Client quotas (Kafka's ClientQuotaManager, ClientRequestQuotaManager and the throttled-channel
delay queue): rates per user / client-id, throttle times, and the muting of throttled connections.

The quota managers' module (LAZY) is imported by the first quota, as an attribute of this
package (`quota.client_quota_manager`, PEP 562).

May import: broker.config, broker.metadata, timer.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"client_quota_manager"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
