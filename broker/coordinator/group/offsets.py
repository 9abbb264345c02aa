"""The coordinator's offset and administrative side: OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete, and offset retention (`offsets.retention.minutes`).

A part of GroupCoordinator (coordinator.py) on the shared state of GroupCoordinatorBase.
"""

from __future__ import annotations

from broker.coordinator.group.coordinator_base import GroupCoordinatorBase
from broker.coordinator.group.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GroupMetadata,
    GroupState,
    OffsetAndMetadata,
)
from broker.coordinator.group.member import UNKNOWN_MEMBER_ID
from broker.logs import get_logger
from protocol.errors import ErrorCode

log = get_logger("kafka_sim.group_coordinator")
TopicPartition = tuple[str, int]


class GroupOffsets(GroupCoordinatorBase):

    # -- OffsetCommit -----------------------------------------------------------------------

    async def handle_commit_offsets(
        self, group_id: str, member_id: str, instance_id: str | None,
        generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        error = self.validate_group_status(group_id, allow_empty=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group_id in self.consumer_groups:  # KIP-848: the member epoch, not a generation
            error = self.validate_consumer_group_commit(group_id, member_id, generation_id)
            if error is not None:
                return dict.fromkeys(offsets, error)
            group = self.group(group_id) or self.manager.groups.setdefault(
                group_id, GroupMetadata(group_id, current_state_timestamp=self.time_ms()))
            return await self.manager.store_offsets(group, offsets)
        group = self.group(group_id)
        if group is None:
            if generation_id >= 0:  # a member of a generation this coordinator never saw
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            # Not managed by the group protocol: the group only keeps offsets.
            group = self.manager.groups[group_id] = GroupMetadata(
                group_id, current_state_timestamp=self.time_ms())
        error = self._validate_offset_commit(group, generation_id, member_id, instance_id)
        if error is None and group.is_(GroupState.COMPLETING_REBALANCE):
            error = ErrorCode.REBALANCE_IN_PROGRESS  # the member knows the generation: let it finish Sync
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE) and group.has(member_id):
            self.complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        return await self.manager.store_offsets(group, offsets)

    # -- TxnOffsetCommit --------------------------------------------------------------------

    async def handle_txn_commit_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
        instance_id: str | None, generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """Offsets committed inside a transaction: written now, visible on its commit marker. An
        empty group id is INVALID_GROUP_ID here (Kafka allows it for OffsetCommit only)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.group(group_id)
        if group is None:
            group = self.manager.groups[group_id] = GroupMetadata(
                group_id, current_state_timestamp=self.time_ms())
        if group.is_(GroupState.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            # v3+ (KIP-447): the producer speaks for a member of the current generation
            error = self.validate_current_member(group, member_id, instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
        if error is not None:
            return dict.fromkeys(offsets, error)
        return await self.manager.store_offsets(group, offsets, (producer_id, producer_epoch))

    def complete_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> None:
        """A WriteTxnMarkers marker was appended to `__consumer_offsets` partition `partition`."""
        self.manager.complete_pending_txn_offsets(partition, producer_id, commit)

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int,
                                member_id: str, instance_id: str | None) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = self.validate_current_member(group, member_id, instance_id)
            if error is not None:
                return error
            return ErrorCode.ILLEGAL_GENERATION if generation_id != group.generation_id else None
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit for a group with members
        return None

    # -- OffsetFetch ------------------------------------------------------------------------

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (all of the group's when `partitions` is None); None = no offset.
        Offsets of an open transaction are not among them (see unstable_partitions)."""
        error = self.validate_group_status(group_id, allow_empty=True)
        if error is not None:
            return error, {}
        group = self.group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.NONE, dict.fromkeys(partitions or [])
        if partitions is None:
            return ErrorCode.NONE, dict(group.offsets)
        return ErrorCode.NONE, {tp: group.offsets.get(tp) for tp in partitions}

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions with a transactional commit waiting for its marker: OffsetFetch with
        require_stable answers them UNSTABLE_OFFSET_COMMIT, so the consumer retries."""
        group = self.group(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    # -- ListGroups / DescribeGroups --------------------------------------------------------

    def handle_list_groups(self, states: set[str]) -> tuple[ErrorCode, list[GroupMetadata]]:
        wanted = {s.lower() for s in states}
        groups = [g for g in self.manager.groups.values()
                  if not wanted or g.state.value.lower() in wanted]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading else ErrorCode.NONE
        return error, groups

    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupMetadata | None]:
        error = self.validate_group_status(group_id, allow_empty=True)
        if error is not None:
            return error, None
        if group_id in self.consumer_groups or group_id in self.share_groups:
            return ErrorCode.NONE, None  # not a classic group: Dead, as Kafka's coordinator
        return ErrorCode.NONE, self.group(group_id)

    # -- DeleteGroups / OffsetDelete --------------------------------------------------------

    async def handle_delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, allow_empty=True)
            if error is None and group_id in self.share_groups:  # empty ones only
                errors[group_id] = await self.delete_share_group(group_id)
                continue
            if error is None and group_id in self.consumer_groups:  # KIP-848: empty ones only
                deleted = await self.delete_consumer_group(group_id)
                if deleted != ErrorCode.NONE or self.group(group_id) is None:
                    errors[group_id] = deleted  # (else its offsets go the classic way below)
                    continue
            group = self.group(group_id) if error is None else None
            if error is not None:
                errors[group_id] = error
            elif group is None or group.is_(GroupState.DEAD):
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self.time_ms())
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if eligible:
            await self.manager.cleanup_group_metadata(eligible, lambda g: list(g.offsets))
            errors.update({g.group_id: ErrorCode.NONE for g in eligible})
            log.info("groups deleted", groups=[g.group_id for g in eligible])
        return errors

    async def handle_delete_offsets(
        self, group_id: str, partitions: list[TopicPartition],
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if group.is_(GroupState.EMPTY):
            errors = dict.fromkeys(partitions, ErrorCode.NONE)
            eligible = [tp for tp in partitions if tp in group.offsets]
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            errors = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions
                      if group.is_subscribed_to_topic(tp[0])}
            eligible = [tp for tp in partitions if tp not in errors]
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            await self.manager.cleanup_group_metadata([group], lambda g: [
                tp for tp in eligible if tp in g.offsets])
            errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
        return ErrorCode.NONE, errors

    # -- retention --------------------------------------------------------------------------

    async def cleanup_expired_offsets(self, now_ms: int | None = None) -> int:
        """Delete offsets past `offsets.retention.minutes` (Kafka's rules in
        GroupMetadata.expired_offsets); a group left empty without offsets is deleted too."""
        now = self.time_ms() if now_ms is None else now_ms
        retention_ms = self.config["offsets.retention.minutes"] * 60_000

        def expired(group: GroupMetadata) -> list[TopicPartition]:
            found = group.expired_offsets(now, retention_ms)
            consumer = self.consumer_groups.get(group.group_id)
            if consumer is None:
                return found
            subscribed = consumer.subscribed_topics()  # KIP-848: kept while a member reads them
            return [tp for tp in found if tp[0] not in subscribed]

        removed = await self.manager.cleanup_group_metadata(
            list(self.manager.groups.values()), expired)
        if removed:
            log.info("expired offsets removed", broker_id=self.broker_id, offsets=removed)
        return removed

    def schedule_retention(self) -> None:
        """Kafka's delete-expired-group-metadata task."""
        self.scheduler.schedule("delete-expired-group-metadata", self.cleanup_expired_offsets,
                                self.config["offsets.retention.check.interval.ms"])
