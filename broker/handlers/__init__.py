"""The API handlers (Kafka's KafkaApis): one module per Kafka API, each registering the versions it
serves; a handler decodes nothing itself (the connection did), calls a subsystem, builds the reply.

ApiVersions is answered from this registry, so the broker advertises exactly what it implements.
Handlers reach the broker's subsystems only through `BrokerServices` (services.py), never the server.
May import: broker.admin, broker.authorizer, broker.coordinator, broker.controller (the controller's requests),
broker.replication, broker.metadata, broker.config, broker.security (SCRAM credentials),
broker.quota, storage, protocol.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.metadata.sanitizer import sanitize
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from protocol.headers import RequestHeader


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    header: RequestHeader
    services: BrokerServices
    client_host: str
    listener: str = "PLAINTEXT"  # the name of the listener the request came in on
    # Who sent it, as Kafka's KafkaPrincipal prints ("User:alice"): set by the connection once
    # TLS or SASL authenticated it; the authorizer decides on it.
    principal: str = "User:ANONYMOUS"
    request_size: int = 0  # the request's frame, in bytes (what a produce quota counts)
    # Client quotas: the longest throttle time a quota gave this request and which quota's delay
    # mutes the connection; whether the request quota is recorded already (Produce and Fetch
    # record it themselves); the broker's time on this request so far, when it is measured.
    throttle_ms: int = 0
    throttle_quota: str = ""
    request_quota_recorded: bool = False
    handler_time_ns: Callable[[], int] | None = None

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def quota_user(self) -> str:
        """The principal's name, sanitized, as quota entities name users."""
        return sanitize(self.principal.partition(":")[2])

    def throttle(self, quota_type: str, throttle_ms: int) -> None:
        """A quota asks to throttle the client: the longest throttle wins (a tie: the later)."""
        if throttle_ms > 0 and throttle_ms >= self.throttle_ms:
            self.throttle_ms, self.throttle_quota = throttle_ms, quota_type


Handle = Callable[[RequestContext, Any], Awaitable["dict | None"]]


@dataclass(frozen=True, slots=True)
class ApiHandler:
    """A registered API: its key, name, versions served and handler."""
    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: Handle


HANDLERS: dict[int, ApiHandler] = {}

# Handler modules, in API key order; importing one registers it.
_MODULES = (
    "produce",
    "describe_producers",
    "fetch",
    "list_offsets",
    "metadata",
    "leader_and_isr",
    "stop_replica",
    "update_metadata",
    "controlled_shutdown",
    "offset_commit",
    "offset_fetch",
    "find_coordinator",
    "join_group",
    "heartbeat",
    "leave_group",
    "sync_group",
    "describe_groups",
    "list_groups",
    "api_versions",
    "create_topics",
    "delete_topics",
    "delete_records",
    "create_partitions",
    "init_producer_id",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "write_txn_markers",
    "txn_offset_commit",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "offset_for_leader_epoch",
    "describe_configs",
    "alter_configs",
    "alter_replica_log_dirs",
    "describe_log_dirs",
    "create_delegation_token",
    "renew_delegation_token",
    "expire_delegation_token",
    "describe_delegation_token",
    "delete_groups",
    "elect_leaders",
    "incremental_alter_configs",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "offset_delete",
    "describe_client_quotas",
    "alter_client_quotas",
    "describe_transactions",
    "list_transactions",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "describe_cluster",
)


def register(api_key: int, name: str, min_version: int, max_version: int) -> Callable[[Handle], Handle]:
    def wrap(handle: Handle) -> Handle:
        if api_key in HANDLERS:
            raise RuntimeError(f"API {api_key} registered twice")
        HANDLERS[api_key] = ApiHandler(api_key, name, min_version, max_version, handle)
        return handle

    return wrap


def repeated_topics(names: Iterable[str]) -> set[str]:
    """Topic names a request lists more than once (Kafka answers those INVALID_REQUEST)."""
    return {name for name, count in Counter(names).items() if count > 1}


def refuse_repeated(repeated: set[str], name: str) -> None:
    if name in repeated:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"topic '{name}' appears more than once in the request")


def load_handlers() -> dict[int, ApiHandler]:
    for module in _MODULES:
        importlib.import_module(f"broker.handlers.{module}")
    return HANDLERS
