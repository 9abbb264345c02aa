"""GroupCoordinatorBase: the state every part of the group coordinator shares (config, timer,
purgatories, the GroupMetadataManager) and the checks they all make; it declares the steps one part
calls in another, so coordinator.py, sessions.py and offsets.py each depend on this module alone."""

from __future__ import annotations

import asyncio
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupRecords,
    Partitions,
)
from broker.coordinator.group.group_metadata import GroupMetadata, GroupState
from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker.coordinator.group.member import MemberMetadata
from broker.coordinator.group.share_group import ShareGroup
from broker.logs import get_logger
from broker.metadata.group_configs import SPECS, GroupConfigCache, default_value
from broker.replication.purgatory import DelayedOperationPurgatory
from protocol.errors import ErrorCode
from timer.scheduler import KafkaScheduler
from timer.timer_task import FunctionTimerTask

log = get_logger("kafka_sim.group_coordinator")

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.metadata_cache import MetadataCache
    from broker.replication.replica_manager import ReplicaManager
    from timer import SystemTimer


class GroupCoordinatorBase(ABC):
    def __init__(self, config: BrokerConfig, broker_id: int, timer: SystemTimer,
                 replica_manager: ReplicaManager, cache: MetadataCache,
                 time_ms: Callable[[], int], group_configs: GroupConfigCache | None = None
                 ) -> None:
        self.config = config
        # Kafka 4's per-group settings (IncrementalAlterConfigs on a GROUP resource): their
        # handler reads the group's overrides before calling in, so a lookup here never waits.
        self.group_configs = group_configs
        self.broker_id = broker_id
        self.timer = timer
        self.time_ms = time_ms  # wall time: persisted timestamps and offset retention
        self.heartbeat_purgatory = DelayedOperationPurgatory("Heartbeat", timer)
        self.join_purgatory = DelayedOperationPurgatory("Rebalance", timer)
        self.manager = GroupMetadataManager(config, broker_id, replica_manager, cache, time_ms,
                                            self.on_group_loaded, self.on_group_unloaded,
                                            self.load_consumer_groups)
        self.active = True
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848 groups (consumer_groups.py)
        self.share_groups: dict[str, ShareGroup] = {}  # KIP-932 groups (share_groups.py)
        self._tasks: set[asyncio.Task] = set()
        self.scheduler = KafkaScheduler(timer, lambda job, exc: log.error(
            "group coordinator job failed", job=job, exc_info=exc))

    # -- plumbing ---------------------------------------------------------------------------

    # -- what KIP-848 and share groups both need of the metadata --------------------------------

    def partition_counts(self, names: set[str]) -> dict[str, int]:
        """The partition counts of the subscribed topics that exist (not the internal ones)."""
        topics = self.manager.cache.topics
        return {n: topics[n].num_partitions for n in names
                if n in topics and not topics[n].internal}

    def topic_id_bytes(self, topic: str) -> bytes | None:
        info = self.manager.cache.topic(topic)
        return info.topic_id.bytes if info is not None else None

    def partitions_of(self, entries) -> Partitions:
        """A record's (topic id, partitions) entries by topic name (a deleted topic's left out)."""
        names = self.manager.cache.topic_name
        out: Partitions = {}
        for tp in entries:
            name = names(uuid.UUID(bytes=bytes(tp.topic_id)))
            if name is not None and tp.partitions:
                out.setdefault(name, set()).update(tp.partitions)
        return out

    def restart_session(self, groups: dict, group_id: str, member, setting: str,
                        expire: Callable[[Any], None], timeout_ms: int | None = None) -> None:
        """Restart a KIP-848 or share group member's session timeout (the group config
        `setting`, or `timeout_ms`: a classic member's own), a timer task: `expire(group)` if it
        runs out with the member still in `groups[group_id]`."""
        if member.session is not None:
            member.session.cancel()

        def run() -> None:
            current = groups.get(group_id)
            if current is not None and current.members.get(member.member_id) is member:
                expire(current)

        member.session = FunctionTimerTask(
            self.group_setting(group_id, setting) if timeout_ms is None else timeout_ms, run)
        self.timer.add(member.session)

    async def read_group_configs(self, group_id: str) -> None:
        """Have the group's config overrides at hand (a store read the first time)."""
        if self.group_configs is not None:
            await self.group_configs.overrides(group_id)

    def group_setting(self, group_id: str, name: str) -> int:
        """A group config's value for the group (its override, else the broker's default)."""
        if self.group_configs is not None:
            return int(self.group_configs.value(group_id, name))
        return int(default_value(self.config, SPECS[name]))

    def spawn(self, coro: Awaitable) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_leadership(self, partition: int, is_leader: bool) -> None:
        (self.manager.on_elected if is_leader else self.manager.on_resigned)(partition)
        if not is_leader:
            self.forget_consumer_groups(partition)
            self.forget_share_groups(partition)

    def shutdown(self) -> None:
        self.active = False
        self.scheduler.shutdown()
        self.manager.shutdown()
        for task in self._tasks:
            task.cancel()
        self.heartbeat_purgatory.shutdown()
        self.join_purgatory.shutdown()
        for group_id in list(self.consumer_groups):
            self.forget_consumer_group(group_id)
        for group_id in list(self.share_groups):
            self.forget_share_group(group_id)

    def validate_group_status(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode | None:
        if group_id is None or (group_id == "" and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    def group(self, group_id: str) -> GroupMetadata | None:
        return self.manager.groups.get(group_id)

    @staticmethod
    def validate_current_member(group: GroupMetadata, member_id: str,
                                instance_id: str | None) -> ErrorCode | None:
        if instance_id is not None:
            current = group.current_static_member_id(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.FENCED_INSTANCE_ID if current != member_id else None
        return None if group.has(member_id) else ErrorCode.UNKNOWN_MEMBER_ID

    @classmethod
    def validate_generation(cls, group: GroupMetadata, generation_id: int, member_id: str,
                            instance_id: str | None) -> ErrorCode | None:
        """What SyncGroup and Heartbeat check first: a live group, a known member, its generation."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = cls.validate_current_member(group, member_id, instance_id)
        if error is not None:
            return error
        return ErrorCode.ILLEGAL_GENERATION if generation_id != group.generation_id else None

    def consumer_group_with_members(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group a classic request goes to (one with members: an empty consumer
        group gives way to the classic group a JoinGroup makes)."""
        group = self.consumer_groups.get(group_id)
        return group if group is not None and group.members else None

    def validate_consumer_group_commit(self, group_id: str, member_id: str,
                                       member_epoch: int) -> ErrorCode | None:
        """OffsetCommit and OffsetFetch of a consumer group (None: a classic or unknown group, or
        the member may): Kafka's ConsumerGroup.validateOffsetCommit."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not member_id:
            return None if not group.members else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:  # a classic member's epoch is its generation
            return ErrorCode.ILLEGAL_GENERATION if member.classic is not None \
                else ErrorCode.STALE_MEMBER_EPOCH
        return None

    # -- steps one part of the coordinator takes in another ---------------------------------

    @abstractmethod
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None: ...

    @abstractmethod
    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool: ...

    @abstractmethod
    def on_complete_join(self, group: GroupMetadata) -> None: ...

    @abstractmethod
    def complete_and_schedule_next_heartbeat_expiration(self, group: GroupMetadata,
                                                        member: MemberMetadata) -> None: ...

    @abstractmethod
    def try_complete_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool,
                               force_complete: Callable[[], bool]) -> bool: ...

    @abstractmethod
    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None: ...

    @abstractmethod
    def on_group_loaded(self, group: GroupMetadata) -> None: ...

    @abstractmethod
    def on_group_unloaded(self, group: GroupMetadata) -> None: ...

    @abstractmethod
    def forget_consumer_groups(self, partition: int) -> None: ...

    @abstractmethod
    def forget_consumer_group(self, group_id: str) -> None: ...

    @abstractmethod
    def forget_share_groups(self, partition: int) -> None: ...

    @abstractmethod
    def forget_share_group(self, group_id: str) -> None: ...

    @abstractmethod
    async def delete_share_group(self, group_id: str) -> ErrorCode: ...

    @abstractmethod
    def load_share_groups(self, loaded: ConsumerGroupRecords) -> None: ...

    @abstractmethod
    def load_consumer_groups(self, loaded: ConsumerGroupRecords) -> None: ...

    # KIP-848's migration (classic_members.py): classic members in a consumer group, and a group
    # changing kind while it has members

    @abstractmethod
    def upgrade_to_consumer_group(self, group: GroupMetadata) -> ConsumerGroup: ...

    @abstractmethod
    def downgrade_to_classic_group(self, group: ConsumerGroup, leaving_member_id: str,
                                   why: str) -> bool: ...

    @abstractmethod
    def classic_join_to_consumer_group(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None,
        require_known_member_id: bool, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], callback: Callable[[Any], Any]) -> None: ...

    @abstractmethod
    def classic_sync_to_consumer_group(
        self, group: ConsumerGroup, generation_id: int, member_id: str,
        protocol_type: str | None, protocol_name: str | None, instance_id: str | None,
        callback: Callable[[Any], Any]) -> None: ...

    @abstractmethod
    def classic_heartbeat_to_consumer_group(self, group: ConsumerGroup, member_id: str,
                                            instance_id: str | None,
                                            generation_id: int) -> ErrorCode: ...

    @abstractmethod
    def classic_leave_to_consumer_group(self, group: ConsumerGroup,
                                        leaving: list[tuple[str, str | None]]
                                        ) -> list[ErrorCode]: ...

    @abstractmethod
    async def delete_consumer_group(self, group_id: str) -> ErrorCode: ...

    @abstractmethod
    def give_way_to_classic_group(self, group_id: str) -> None: ...
