"""How the controller tells brokers what it decided: LeaderAndIsr, UpdateMetadata and StopReplica,
each carrying the controller epoch. The embedded cluster delivers them by direct calls
(broker/server/cluster_context.py), where a broker that is not running is skipped and one that
refuses a stale epoch raises KafkaError STALE_CONTROLLER_EPOCH; the multi-process cluster sends
them over TCP (broker/interbroker/), queued per broker, answered asynchronously."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from broker.metadata.metadata_cache import MetadataSnapshot
from broker.metadata.partition_state import LeaderAndIsr
from broker.metadata.replica_assignment import ReplicaAssignment
from protocol.errors import ErrorCode, KafkaError
from storage.log_config import LogConfig

# A broker's LeaderAndIsr or StopReplica answer per partition (how the controller learns offline
# replicas, and that a deleted topic's replica deleted its log).
PartitionErrors = Callable[[dict[tuple[str, int], ErrorCode]], None]


class ControllerChannel(Protocol):
    def update_brokers(self, addresses: dict[int, tuple[str, int]]) -> None:
        """The live brokers' inter-broker addresses, from their registrations (Kafka's
        ControllerChannelManager addBroker/removeBroker): requests for any other are dropped."""

    def send_leader_and_isr(self, broker_id: int, controller_epoch: int,
                            states: list[LeaderAndIsr], configs: dict[str, LogConfig],
                            on_response: PartitionErrors | None = None) -> None: ...

    def send_update_metadata(self, broker_id: int, snapshot: MetadataSnapshot) -> None: ...

    def send_stop_replica(self, broker_id: int, controller_epoch: int,
                          keys: list[tuple[str, int]], *, delete: bool,
                          on_response: PartitionErrors | None = None) -> None: ...


class ControllerRequestTarget(Protocol):
    """What a broker does with the controller's requests when they come over the wire: the same
    apply_* steps the in-process channel calls, plus reading topic configs, which are not on the
    wire (brokers read them from the metadata store, as Kafka's do)."""

    async def apply_leader_and_isr(self, controller_epoch: int, states: list[LeaderAndIsr],
                                   configs: dict[str, LogConfig]
                                   ) -> dict[tuple[str, int], ErrorCode]: ...

    def apply_update_metadata(self, snapshot: MetadataSnapshot) -> None: ...

    def apply_stop_replica(self, controller_epoch: int, keys: list[tuple[str, int]], *,
                           delete: bool) -> None: ...

    async def topic_config_overrides(self, topics: list[str]) -> dict[str, dict[str, str]]: ...

    def log_config_for(self, overrides: dict[str, str]) -> LogConfig: ...

    async def controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        """As the controller: move leadership off `broker_id`; the partitions it still leads.
        KafkaError NOT_CONTROLLER on any other broker."""
        ...

    # The admin requests only the controller answers (KafkaError NOT_CONTROLLER elsewhere), each
    # queued as an event of its controller: see Controller.elect_leaders and the reassignments.
    async def elect_leaders(self, keys: list[tuple[str, int]], *, unclean: bool
                            ) -> dict[tuple[str, int], int | KafkaError]: ...

    async def alter_partition_reassignments(
        self, reassignments: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]: ...

    async def list_partition_reassignments(self, keys: list[tuple[str, int]] | None
                                           ) -> dict[tuple[str, int], ReplicaAssignment]: ...
