"""Topic and config administration (Kafka's ZkAdminManager and AutoTopicCreationManager): create,
grow and delete topics, alter and describe configs, all as writes to the metadata store.

Topic admin and client quotas (LAZY) are imported on first use, as attributes of this package
(`admin.admin_manager`, PEP 562): a broker nobody asks for them starts without them.

May import: broker.metadata, broker.config, storage, protocol.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"admin_manager", "auto_topic_creation", "client_quotas"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
