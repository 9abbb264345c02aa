"""BrokerServices: what a request handler may use of its broker — Kafka's KafkaApis gets the same
set in its constructor. The server builds one per broker; handlers never see the server itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.config import BrokerConfig
from broker.controller.controller_channel import ControllerRequestTarget
from broker.metadata.client_quota_configs import ClientQuotaConfigs
from broker.metadata.dynamic_broker_configs import DynamicBrokerConfigs
from broker.metadata.metadata_cache import MetadataCache
from broker.metadata.producer_id_manager import ProducerIdManager
from broker.quota.quota_managers import QuotaManagers
from broker.replication.replica_manager import ReplicaManager
from broker.security.scram_credentials import ScramCredentialStore

if TYPE_CHECKING:
    from broker.admin.admin_manager import AdminManager
    from broker.admin.auto_topic_creation import AutoTopicCreationManager
    from broker.authorizer.acl_authorizer import AclAuthorizer
    from broker.coordinator.group.coordinator import GroupCoordinator
    from broker.coordinator.share.share_coordinator import ShareCoordinator
    from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from broker.coordinator.transaction.transaction_marker_channel import MarkerTransport
    from broker.share.share_partition_manager import SharePartitionManager


class BuiltOnFirstUse(Protocol):
    """The subsystems the server builds when a request first needs them (their imports are
    start-up time a broker nobody asks for groups, transactions or topic admin never pays)."""

    @property
    def group_coordinator(self) -> GroupCoordinator: ...

    @property
    def transaction_coordinator(self) -> TransactionCoordinator: ...

    @property
    def admin_manager(self) -> AdminManager: ...

    @property
    def auto_topic_creation(self) -> AutoTopicCreationManager: ...

    @property
    def share_partition_manager(self) -> SharePartitionManager: ...

    @property
    def share_coordinator(self) -> ShareCoordinator: ...


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """What handlers may use of their broker."""
    broker_id: int
    cluster_id: str
    config: BrokerConfig
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    built_on_first_use: BuiltOnFirstUse
    producer_ids: ProducerIdManager
    advertised_address: Callable[[str], tuple[str, int]]  # per listener, once bound
    controller_requests: ControllerRequestTarget  # LeaderAndIsr, UpdateMetadata, StopReplica
    authorizer: AclAuthorizer | None = None  # None: no authorizer.class.name, everything allowed
    scram_credentials: ScramCredentialStore | None = None  # /config/users in the metadata store
    client_quota_configs: ClientQuotaConfigs | None = None  # /config/users and /config/clients
    quotas: QuotaManagers | None = None  # produce, fetch and request quotas; throttled channels
    # WriteTxnMarkers to leaders and, the other way, KIP-890 verification with coordinators
    txn_transport: MarkerTransport | None = None
    # this broker's dynamic configs and the cluster's dynamic defaults (/config/brokers)
    dynamic_configs: DynamicBrokerConfigs | None = None

    @property
    def group_coordinator(self) -> GroupCoordinator:
        return self.built_on_first_use.group_coordinator

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        return self.built_on_first_use.transaction_coordinator

    @property
    def admin_manager(self) -> AdminManager:
        return self.built_on_first_use.admin_manager

    @property
    def auto_topic_creation(self) -> AutoTopicCreationManager:
        return self.built_on_first_use.auto_topic_creation

    @property
    def share_partition_manager(self) -> SharePartitionManager:
        return self.built_on_first_use.share_partition_manager

    @property
    def share_coordinator(self) -> ShareCoordinator:
        return self.built_on_first_use.share_coordinator
