"""The authorizer (Kafka's AclAuthorizer in ZooKeeper mode): ACLs kept in the metadata store and
cached on every broker, consulted by the handlers on the principal of each request.

The authorizer and its bindings (LAZY) are imported on first use, as attributes of this package
(`authorizer.acl_authorizer`, PEP 562): a broker without `authorizer.class.name` never loads them.

May import: broker.metadata, broker.config, protocol.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"acl_authorizer", "acl"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
