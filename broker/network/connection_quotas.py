"""Kafka's ConnectionQuotas: how many client connections the broker keeps, in all and per IP."""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Mapping


def normalize_ip(host: str) -> str:
    """One spelling per address (`::ffff:127.0.0.1` stays distinct from `127.0.0.1`, as in Java)."""
    try:
        return str(ipaddress.ip_address(host.split("%")[0]))
    except ValueError:
        return host


class ConnectionQuotas:
    """`max.connections` over all listeners, `max.connections.per.ip` with its per-address
    overrides. A connection over a limit is refused at once (the caller closes it)."""

    def __init__(self, max_connections: int, max_per_ip: int,
                 per_ip_overrides: Mapping[str, int] | None = None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = {normalize_ip(ip): n for ip, n in (per_ip_overrides or {}).items()}
        self.total = 0
        self.per_ip: Counter[str] = Counter()

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(normalize_ip(ip), self.max_per_ip)

    def try_acquire(self, ip: str) -> str | None:
        """Count a new connection from `ip`; or, over a limit, count nothing and say which."""
        ip = normalize_ip(ip)
        if self.per_ip[ip] >= self.limit_for(ip):
            return f"{ip} has {self.per_ip[ip]} connections, max.connections.per.ip is {self.limit_for(ip)}"
        if self.total >= self.max_connections:
            return f"the broker has {self.total} connections, max.connections is {self.max_connections}"
        self.per_ip[ip] += 1
        self.total += 1
        return None

    def release(self, ip: str) -> None:
        ip = normalize_ip(ip)
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
        self.total -= 1
