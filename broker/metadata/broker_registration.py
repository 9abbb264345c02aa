"""A broker's registration, the ephemeral /brokers/ids/N, in Kafka's JSON (version 5): written by
the broker, read by the controller, the controller channel and the control API. Its `host` and
`port` are the inter-broker listener's; `endpoints` lists every listener's advertised address."""

from __future__ import annotations

from typing import Any

from broker.config import Listener, parse_listeners
from broker.metadata import zk_paths as paths
from broker.metadata.store import MetadataStore, NoNodeError

Address = tuple[str, int]


def registration(endpoints: dict[str, Address], inter_broker_listener: str,
                 timestamp_ms: int, protocols: dict[str, str] | None = None) -> dict[str, Any]:
    host, port = endpoints[inter_broker_listener]
    return {
        "listener_security_protocol_map": {name: (protocols or {}).get(name, "PLAINTEXT")
                                           for name in endpoints},
        "endpoints": [str(Listener(n, h, p)) for n, (h, p) in endpoints.items()],
        "jmx_port": -1, "features": {},
        "host": host, "port": port, "timestamp": str(timestamp_ms), "version": 5,
    }


def registered_endpoints(data: dict[str, Any]) -> dict[str, Address]:
    """Listener name -> advertised address, from a registration's data."""
    return {x.name: (x.host, x.port) for x in parse_listeners(",".join(data.get("endpoints", [])))}


async def registered_address(store: MetadataStore, broker_id: int) -> Address | None:
    """Where other brokers reach `broker_id` (its inter-broker listener); None once it left."""
    try:
        data, _ = await store.get_json(paths.broker(broker_id))
    except NoNodeError:
        return None
    return data["host"], data["port"]
