"""The API handlers (Kafka's KafkaApis): one module per Kafka API, each registering the versions it
serves; a handler decodes nothing itself (the connection did), calls a subsystem, builds the reply.

ApiVersions is answered from this registry, so the broker advertises exactly what it implements.
Handlers reach the broker's subsystems only through `BrokerServices` (services.py), never the server.
May import: broker.admin, broker.authorizer, broker.coordinator, broker.controller (the controller's requests),
broker.replication, broker.metadata, broker.config, broker.security (SCRAM credentials),
storage, protocol.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

    @property
    def api_version(self) -> int:
        return self.header.api_version


Handle = Callable[[RequestContext, Any], Awaitable["dict | None"]]


@dataclass(frozen=True, slots=True)
class ApiHandler:
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
    "create_delegation_token",
    "renew_delegation_token",
    "expire_delegation_token",
    "describe_delegation_token",
    "delete_groups",
    "incremental_alter_configs",
    "offset_delete",
    "describe_transactions",
    "list_transactions",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
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
