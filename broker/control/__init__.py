"""Seeing and bending the cluster: the HTTP control API over a ClusterControl, its Python client,
`kafka-sim ctl`, and the faults injected on the request path.

The HTTP side (LAZY: the API, the console, the Prometheus rendering) is imported on first use, as
attributes of this package (`control.control_api`, PEP 562): a `kafka-sim ctl` or a broker without
the control listener never loads aiohttp.

May import: protocol (nothing else of broker: the server hands it a ClusterControl).
"""

from __future__ import annotations

import importlib
from types import ModuleType

LAZY = frozenset({"control_api", "web_console", "prometheus_metrics"})


def __getattr__(name: str) -> ModuleType:
    if name in LAZY:  # imported once: the import binds it as this package's attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
