"""How the controller tells brokers what it decided: LeaderAndIsr, UpdateMetadata and StopReplica,
each carrying the controller epoch. The embedded cluster delivers them by direct calls
(broker/server/cluster.py); a broker that is not running is skipped, one that refuses a stale
epoch raises KafkaError STALE_CONTROLLER_EPOCH."""

from __future__ import annotations

from typing import Protocol

from broker.metadata.metadata_cache import MetadataSnapshot
from broker.metadata.partition_state import LeaderAndIsr
from storage.log_config import LogConfig


class ControllerChannel(Protocol):
    def send_leader_and_isr(self, broker_id: int, controller_epoch: int,
                            states: list[LeaderAndIsr], configs: dict[str, LogConfig]) -> None: ...

    def send_update_metadata(self, broker_id: int, snapshot: MetadataSnapshot) -> None: ...

    def send_stop_replica(self, broker_id: int, controller_epoch: int,
                          keys: list[tuple[str, int]], *, delete: bool) -> None: ...
