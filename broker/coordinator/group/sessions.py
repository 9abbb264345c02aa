"""The coordinator's member sessions: Heartbeat, LeaveGroup, session expiry (DelayedHeartbeat),
removing members, and what loading or unloading an offsets partition does to its groups.

A part of GroupCoordinator (coordinator.py) on the shared state of GroupCoordinatorBase.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.coordinator.group.coordinator_base import GroupCoordinatorBase
from broker.coordinator.group.delayed import DelayedHeartbeat, join_key, member_key
from broker.coordinator.group.group_metadata import GroupMetadata, GroupState
from broker.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from broker.logs import get_logger
from protocol.errors import ErrorCode

log = get_logger("kafka_sim.group_coordinator")


class GroupSessions(GroupCoordinatorBase):
    # -- LeaveGroup -------------------------------------------------------------------------

    def handle_leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]],
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Members (member id, group instance id) leave; an empty member id with an instance id
        removes that static member (the admin form). Returns the group error and one per member."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, []
        consumer_group = self.consumer_group_with_members(group_id)
        if consumer_group is not None:
            return ErrorCode.NONE, self.classic_leave_to_consumer_group(consumer_group, leaving)
        group = self.group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        return ErrorCode.NONE, [self._leave(group, member_id, instance_id) for member_id, instance_id in leaving]

    def _leave(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode:
        if member_id == UNKNOWN_MEMBER_ID:
            member_id = group.current_static_member_id(instance_id) or ""
            if not member_id:
                return ErrorCode.UNKNOWN_MEMBER_ID
            instance_id = None
        elif group.is_pending_member(member_id):
            self.remove_pending_member_and_update_group(group, member_id)
            self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))
            return ErrorCode.NONE
        error = self.validate_current_member(group, member_id, instance_id)
        if error is not None:
            return error
        log.info("member left", group=group.group_id, member=member_id)
        self.remove_member_and_update_group(group, group.get(member_id))
        self.remove_heartbeat_for_leaving_member(group, member_id)
        return ErrorCode.NONE

    # -- Heartbeat and sessions -------------------------------------------------------------

    def handle_heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                         generation_id: int) -> ErrorCode:
        error = self.validate_group_status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # answered blindly while loading
        if error is not None:
            return error
        consumer_group = self.consumer_group_with_members(group_id)
        if consumer_group is not None:
            return self.classic_heartbeat_to_consumer_group(consumer_group, member_id,
                                                            instance_id, generation_id)
        group = self.group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self.validate_generation(group, generation_id, member_id, instance_id)
        if error is not None:
            return error
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(GroupState.PREPARING_REBALANCE) else ErrorCode.NONE

    def complete_and_schedule_next_heartbeat_expiration(self, group: GroupMetadata,
                                                        member: MemberMetadata) -> None:
        self.complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def complete_and_schedule_next_expiration(self, group: GroupMetadata, member: MemberMetadata,
                                              timeout_ms: int) -> None:
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self._schedule_heartbeat(group, member.member_id, timeout_ms, is_pending=False)

    def _schedule_heartbeat(self, group: GroupMetadata, member_id: str, timeout_ms: int,
                            *, is_pending: bool) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, is_pending, timeout_ms),
            [member_key(group.group_id, member_id)])

    def remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        if group.has(member_id):
            group.get(member_id).is_leaving = True
        self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))

    def try_complete_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool,
                               force_complete: Callable[[], bool]) -> bool:
        if group.is_(GroupState.DEAD):
            return force_complete()
        if is_pending:  # done once the pending member joined (or left)
            return force_complete() if group.has(member_id) or not group.is_pending_member(
                member_id) else False
        member = group.members.get(member_id)
        if member is None or member.is_leaving or member.has_satisfied_heartbeat:
            return force_complete()
        return False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if group.is_(GroupState.DEAD):
            return
        if is_pending:
            log.info("pending member expired", group=group.group_id, member=member_id)
            self.remove_pending_member_and_update_group(group, member_id)
        elif group.has(member_id) and not group.get(member_id).has_satisfied_heartbeat:
            log.info("member session expired", group=group.group_id, member=member_id)
            self.remove_member_and_update_group(group, group.get(member_id))

    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        # A new member may time out with its JoinGroup parked: answer it before removing it.
        group.maybe_invoke_join_callback(member, JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, f"removing member {member.member_id}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(join_key(group.group_id))

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(join_key(group.group_id))

    # -- loading and unloading --------------------------------------------------------------

    def on_group_loaded(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            self.complete_and_schedule_next_heartbeat_expiration(group, member)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(GroupState.DEAD, self.time_ms())
        if previous is GroupState.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(member, JoinGroupResult(member.member_id,
                                                                         ErrorCode.NOT_COORDINATOR))
            self.join_purgatory.check_and_complete(join_key(group.group_id))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
                self.heartbeat_purgatory.check_and_complete(member_key(group.group_id,
                                                                       member.member_id))

