"""BrokerServices: what a request handler may use of its broker — Kafka's KafkaApis gets the same
set in its constructor. The server builds one per broker; handlers never see the server itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.admin.admin_manager import AdminManager
from broker.admin.auto_topic_creation import AutoTopicCreationManager
from broker.authorizer.acl_authorizer import AclAuthorizer
from broker.config import BrokerConfig
from broker.controller.controller_channel import ControllerRequestTarget
from broker.coordinator.group import GroupCoordinator
from broker.coordinator.transaction import TransactionCoordinator
from broker.metadata.client_quota_configs import ClientQuotaConfigs
from broker.metadata.metadata_cache import MetadataCache
from broker.metadata.producer_id_manager import ProducerIdManager
from broker.quota.quota_managers import QuotaManagers
from broker.replication.replica_manager import ReplicaManager
from broker.security.scram_credentials import ScramCredentialStore


@dataclass(frozen=True, slots=True)
class BrokerServices:
    broker_id: int
    cluster_id: str
    config: BrokerConfig
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    admin_manager: AdminManager
    auto_topic_creation: AutoTopicCreationManager
    producer_ids: ProducerIdManager
    advertised_address: Callable[[str], tuple[str, int]]  # per listener, once bound
    controller_requests: ControllerRequestTarget  # LeaderAndIsr, UpdateMetadata, StopReplica
    authorizer: AclAuthorizer | None = None  # None: no authorizer.class.name, everything allowed
    scram_credentials: ScramCredentialStore | None = None  # /config/users in the metadata store
    client_quota_configs: ClientQuotaConfigs | None = None  # /config/users and /config/clients
    quotas: QuotaManagers | None = None  # produce, fetch and request quotas; throttled channels
