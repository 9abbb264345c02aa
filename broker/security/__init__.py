"""Authentication, as Kafka's common.security: TLS contexts from the ssl.* settings, the principal a
client certificate gives, the SASL mechanisms (PLAIN, SCRAM-SHA-256/512) and SCRAM credentials.

TLS and the SASL mechanisms (LAZY) are imported on first use, as attributes of this package
(`security.ssl_factory`, PEP 562): a PLAINTEXT broker never loads them.

May import: broker.config, broker.metadata.
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"jaas", "ssl_factory", "plain", "scram"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
