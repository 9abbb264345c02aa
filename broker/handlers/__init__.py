"""The API handlers (Kafka's KafkaApis): one module per Kafka API, each registering its handler; a
handler decodes nothing itself (the connection did), calls a subsystem, builds the reply.

ApiVersions is answered from this registry's table, so the broker advertises exactly what it
implements; a handler module is imported by the first request of its API.
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
from types import ModuleType
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
    # Set by a handler whose response has thousands of entries (Metadata of every partition):
    # the connection encodes it in a worker thread instead of holding the loop for it.
    large_response: bool = False
    # The request's finer name in the request metrics, besides its API's (Kafka counts a Fetch
    # also as FetchConsumer or FetchFollower)
    metric_name: str = ""
    # The connection can send record bytes from the segment files (plaintext TCP: sendfile)
    zero_copy: bool = False

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


@dataclass(slots=True)
class ApiHandler:
    """A served API: its key, name, versions and handler module. The module is imported by the
    first request of the API (start-up loads none); its `@register` binds the coroutine."""
    api_key: int
    name: str
    min_version: int
    max_version: int
    module: str
    registered: Handle | None = None

    @property
    def handle(self) -> Handle:
        return self.registered or self.load()

    def handler_module(self) -> ModuleType:
        """The handler's module, imported by this first call (what else of it a caller needs)."""
        return importlib.import_module(f"broker.handlers.{self.module}")

    def load(self) -> Handle:
        """Import the handler's module (its `@register` binds the coroutine)."""
        self.handler_module()
        if self.registered is None:
            raise RuntimeError(f"broker.handlers.{self.module} registers no {self.name} handler")
        return self.registered


# API key -> (handler module, Kafka's name of the API, lowest and highest version served), in API
# key order: what ApiVersions advertises and what the connection checks a request's version with.
_APIS: dict[int, tuple[str, str, int, int]] = {
    0: ("produce", "Produce", 0, 12),
    1: ("fetch", "Fetch", 0, 17),
    2: ("list_offsets", "ListOffsets", 0, 9),
    3: ("metadata", "Metadata", 0, 12),
    4: ("leader_and_isr", "LeaderAndIsr", 0, 7),
    5: ("stop_replica", "StopReplica", 0, 4),
    6: ("update_metadata", "UpdateMetadata", 0, 8),
    7: ("controlled_shutdown", "ControlledShutdown", 0, 3),
    8: ("offset_commit", "OffsetCommit", 2, 9),
    9: ("offset_fetch", "OffsetFetch", 1, 9),
    10: ("find_coordinator", "FindCoordinator", 0, 6),
    11: ("join_group", "JoinGroup", 0, 9),
    12: ("heartbeat", "Heartbeat", 0, 4),
    13: ("leave_group", "LeaveGroup", 0, 5),
    14: ("sync_group", "SyncGroup", 0, 5),
    15: ("describe_groups", "DescribeGroups", 0, 5),
    16: ("list_groups", "ListGroups", 0, 5),
    17: ("sasl_handshake", "SaslHandshake", 0, 1),
    18: ("api_versions", "ApiVersions", 0, 4),
    19: ("create_topics", "CreateTopics", 0, 7),
    20: ("delete_topics", "DeleteTopics", 0, 6),
    21: ("delete_records", "DeleteRecords", 0, 2),
    22: ("init_producer_id", "InitProducerId", 0, 5),
    23: ("offset_for_leader_epoch", "OffsetForLeaderEpoch", 2, 4),
    24: ("add_partitions_to_txn", "AddPartitionsToTxn", 0, 5),
    25: ("add_offsets_to_txn", "AddOffsetsToTxn", 0, 4),
    26: ("end_txn", "EndTxn", 0, 5),
    27: ("write_txn_markers", "WriteTxnMarkers", 0, 1),
    28: ("txn_offset_commit", "TxnOffsetCommit", 0, 5),
    29: ("describe_acls", "DescribeAcls", 0, 3),
    30: ("create_acls", "CreateAcls", 0, 3),
    31: ("delete_acls", "DeleteAcls", 0, 3),
    32: ("describe_configs", "DescribeConfigs", 0, 4),
    33: ("alter_configs", "AlterConfigs", 0, 2),
    34: ("alter_replica_log_dirs", "AlterReplicaLogDirs", 0, 2),
    35: ("describe_log_dirs", "DescribeLogDirs", 0, 4),
    36: ("sasl_authenticate", "SaslAuthenticate", 0, 2),
    37: ("create_partitions", "CreatePartitions", 0, 3),
    38: ("create_delegation_token", "CreateDelegationToken", 0, 3),
    39: ("renew_delegation_token", "RenewDelegationToken", 0, 2),
    40: ("expire_delegation_token", "ExpireDelegationToken", 0, 2),
    41: ("describe_delegation_token", "DescribeDelegationToken", 0, 3),
    42: ("delete_groups", "DeleteGroups", 0, 2),
    43: ("elect_leaders", "ElectLeaders", 0, 2),
    44: ("incremental_alter_configs", "IncrementalAlterConfigs", 0, 1),
    45: ("alter_partition_reassignments", "AlterPartitionReassignments", 0, 0),
    46: ("list_partition_reassignments", "ListPartitionReassignments", 0, 0),
    47: ("offset_delete", "OffsetDelete", 0, 0),
    48: ("describe_client_quotas", "DescribeClientQuotas", 0, 1),
    49: ("alter_client_quotas", "AlterClientQuotas", 0, 1),
    50: ("describe_user_scram_credentials", "DescribeUserScramCredentials", 0, 0),
    51: ("alter_user_scram_credentials", "AlterUserScramCredentials", 0, 0),
    60: ("describe_cluster", "DescribeCluster", 0, 1),
    61: ("describe_producers", "DescribeProducers", 0, 0),
    65: ("describe_transactions", "DescribeTransactions", 0, 0),
    66: ("list_transactions", "ListTransactions", 0, 1),
    68: ("consumer_group_heartbeat", "ConsumerGroupHeartbeat", 0, 1),
    69: ("consumer_group_describe", "ConsumerGroupDescribe", 0, 0),
    76: ("share_group_heartbeat", "ShareGroupHeartbeat", 1, 1),
    77: ("share_group_describe", "ShareGroupDescribe", 1, 1),
    78: ("share_fetch", "ShareFetch", 1, 2),
    79: ("share_acknowledge", "ShareAcknowledge", 1, 2),
    83: ("initialize_share_group_state", "InitializeShareGroupState", 0, 0),
    84: ("read_share_group_state", "ReadShareGroupState", 0, 0),
    85: ("write_share_group_state", "WriteShareGroupState", 0, 0),
    86: ("delete_share_group_state", "DeleteShareGroupState", 0, 0),
    90: ("describe_share_group_offsets", "DescribeShareGroupOffsets", 0, 0),
    91: ("alter_share_group_offsets", "AlterShareGroupOffsets", 0, 0),
    92: ("delete_share_group_offsets", "DeleteShareGroupOffsets", 0, 0),
}

HANDLERS: dict[int, ApiHandler] = {
    key: ApiHandler(key, name, min_version, max_version, module)
    for key, (module, name, min_version, max_version) in _APIS.items()}


def register(api_key: int) -> Callable[[Handle], Handle]:
    """Bind the decorated coroutine as the handler of `api_key` (its entry in the table above)."""
    def wrap(handle: Handle) -> Handle:
        entry = HANDLERS[api_key]
        if entry.registered is not None:
            raise RuntimeError(f"API {api_key} registered twice")
        entry.registered = handle
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
    """Every handler module imported (for tests walking them all; a broker imports each one with
    the first request of its API)."""
    for handler in HANDLERS.values():
        handler.load()
    return HANDLERS
