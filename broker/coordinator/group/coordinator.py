"""GroupCoordinator: the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for
the groups of the `__consumer_offsets` partitions this broker leads, on the shared timer.

A rebalance: a join moves the group to PreparingRebalance and parks every JoinGroup in a DelayedJoin
until all known members rejoined (or the rebalance timeout); then the generation goes up, a protocol
is chosen by the members' votes, the leader gets every member's metadata, and the group waits in
CompletingRebalance for the leader's SyncGroup, whose assignment is stored, then handed out
(Stable). Sessions are DelayedHeartbeats: a member that stops heartbeating is removed, which starts
another rebalance. Sessions, leaving and loading are in sessions.py; offsets, listing, describing
and deleting in offsets.py; the state they share in coordinator_base.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from broker.coordinator.group.classic_members import ClassicMembers
from broker.coordinator.group.delayed import (
    DelayedJoin,
    InitialDelayedJoin,
    join_key,
)
from broker.coordinator.group.group_metadata import GroupMetadata, GroupState
from broker.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinGroupResult,
    MemberMetadata,
    SyncCallback,
    SyncGroupResult,
)
from broker.coordinator.group.offsets import GroupOffsets
from broker.coordinator.group.sessions import GroupSessions
from broker.coordinator.group.share_groups import ShareGroups
from broker.logs import get_logger
from protocol.errors import ErrorCode

log = get_logger("kafka_sim.group_coordinator")
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


async def await_callback(start: Callable[[Callable[[Any], None]], Any]) -> Any:
    """Call `start(callback)` and wait until the callback is called; return what it was given."""
    future = asyncio.get_running_loop().create_future()

    def done(result: Any) -> None:
        if not future.done():
            future.set_result(result)

    start(done)
    return await future


class GroupCoordinator(GroupOffsets, GroupSessions, ClassicMembers, ShareGroups):
    """JoinGroup and SyncGroup, and the rebalance they drive; the rest comes from the mixins."""

    # -- JoinGroup --------------------------------------------------------------------------

    def handle_join_group(
        self, group_id: str, member_id: str, instance_id: str | None, require_known_member_id: bool,
        client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]], callback: JoinCallback,
    ) -> None:
        error = self.validate_group_status(group_id)
        if error is None and not (self.config["group.min.session.timeout.ms"] <= session_timeout_ms
                                  <= self.config["group.max.session.timeout.ms"]):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error is not None:
            return callback(JoinGroupResult(member_id, error))
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None and consumer_group.members:  # a KIP-848 group has it
            return self.classic_join_to_consumer_group(
                consumer_group, member_id, instance_id, require_known_member_id, client_id,
                client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                callback)
        if consumer_group is not None:  # an empty consumer group becomes a classic one
            self.give_way_to_classic_group(group_id)
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.group(group_id)
        if group is None:
            if not is_unknown:
                return callback(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            group = self.manager.groups[group_id] = GroupMetadata(
                group_id, current_state_timestamp=self.time_ms())
        args = (instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols, callback)
        if group.is_(GroupState.DEAD):  # just deleted or unloaded: find the coordinator again, rejoin
            callback(JoinGroupResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinGroupResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif is_unknown:
            self._new_member_join(group, require_known_member_id, *args)
        else:
            self._current_member_join(group, member_id, *args)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(join_key(group_id))

    def _new_member_join(self, group: GroupMetadata, require_known_member_id: bool,
                         instance_id: str | None, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], callback: JoinCallback) -> None:
        new_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.current_static_member_id(instance_id)
            if old_id is not None:
                return self._update_static_member(
                    group, old_id, new_id, instance_id, rebalance_timeout_ms, session_timeout_ms,
                    protocols, callback)
        elif require_known_member_id:  # v4+: hand out the id first; the member rejoins with it
            group.pending_members.add(new_id)
            self._schedule_heartbeat(group, new_id, session_timeout_ms, is_pending=True)
            return callback(JoinGroupResult(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                       rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                       protocols, callback)

    def _current_member_join(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                             client_id: str, client_host: str, rebalance_timeout_ms: int,
                             session_timeout_ms: int, protocol_type: str,
                             protocols: list[tuple[str, bytes]], callback: JoinCallback) -> None:
        if group.is_pending_member(member_id):
            return self._add_member_and_rebalance(
                group, member_id, None, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, protocols, callback)
        error = self.validate_current_member(group, member_id, instance_id)
        if error is not None:
            return callback(JoinGroupResult(member_id, error))
        member = group.get(member_id)

        def rebalance() -> None:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                              session_timeout_ms, callback)

        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            rebalance()
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):  # a retry of the join it already got an answer for
                callback(self._join_result(group, member_id, with_members=group.is_leader(member_id)))
            else:
                rebalance()
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                rebalance()  # the leader rejoining forces a rebalance (e.g. new topic metadata)
            else:
                callback(self._join_result(group, member_id, with_members=False))
        else:  # Empty or Dead: reset and rejoin
            callback(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result(self, group: GroupMetadata, member_id: str, *, with_members: bool,
                     leader: str | None = None) -> JoinGroupResult:
        return JoinGroupResult(
            member_id, ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
            leader if leader is not None else group.leader_id or "",
            group.current_member_metadata() if with_members else [])

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str,
                                  instance_id: str | None, client_id: str, client_host: str,
                                  rebalance_timeout_ms: int, session_timeout_ms: int,
                                  protocol_type: str, protocols: list[tuple[str, bytes]],
                                  callback: JoinCallback) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, list(protocols), is_new=True)
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # New members cannot heartbeat yet; a JoinGroup that waits too long is dropped instead.
        self.complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, callback: JoinCallback) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self.maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _update_static_member(self, group: GroupMetadata, old_id: str, new_id: str,
                              instance_id: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                              protocols: list[tuple[str, bytes]], callback: JoinCallback) -> None:
        """A known group.instance.id came back without its member id: the old id is fenced."""
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.remove_heartbeat_for_leaving_member(group, old_id)
        member.is_leaving = False
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self.complete_and_schedule_next_heartbeat_expiration(group, member)
        if group.is_(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                # Keep the old leader id in the answer so no member re-assigns a stable group.
                result = self._join_result(group, new_id, with_members=False, leader=current_leader)
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                async def store() -> None:
                    await self.manager.store_group(group, assignment)
                    group.maybe_invoke_join_callback(member, result)

                self.spawn(store())
            else:
                self.maybe_prepare_rebalance(group, f"static member {instance_id} changed protocols")
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"static member {instance_id} rejoined")

    # -- rebalancing ------------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_(GroupState.EMPTY):
            delay = self.config["group.initial.rebalance.delay.ms"]
            op: DelayedJoin = InitialDelayedJoin(self, self.join_purgatory, group, delay, delay,
                                                 max(group.rebalance_timeout_ms - delay, 0))
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.time_ms())
        log.info("preparing to rebalance", group=group.group_id, generation=group.generation_id,
                 reason=reason)
        self.join_purgatory.try_complete_else_watch(op, [join_key(group.group_id)])

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        return force_complete() if group.has_all_members_joined else False

    def on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self.remove_heartbeat_for_leaving_member(group, member.member_id)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another round for sessions to remove the silent members.
            self.join_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms), [join_key(group.group_id)])
            return
        group.init_next_generation(self.time_ms())
        log.info("group rebalanced", group=group.group_id, generation=group.generation_id,
                 state=group.state.value, members=len(group.members), protocol=group.protocol_name)
        if group.is_(GroupState.EMPTY):
            self.spawn(self.manager.store_group(group, {}))
            return
        for member in list(group.members.values()):
            result = self._join_result(group, member.member_id,
                                       with_members=group.is_leader(member.member_id))
            group.maybe_invoke_join_callback(member, result)
            self.complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            result = SyncGroupResult(error, group.protocol_type, group.protocol_name,
                                     member.assignment if error == ErrorCode.NONE else b"")
            if group.maybe_invoke_sync_callback(member, result):
                self.complete_and_schedule_next_heartbeat_expiration(group, member)

    # -- SyncGroup --------------------------------------------------------------------------

    def handle_sync_group(self, group_id: str, generation_id: int, member_id: str,
                          protocol_type: str | None, protocol_name: str | None,
                          instance_id: str | None, assignment: dict[str, bytes],
                          callback: SyncCallback) -> None:
        error = self.validate_group_status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.REBALANCE_IN_PROGRESS  # the rebalance state is lost: rejoin, same coordinator
        consumer_group = self.consumer_group_with_members(group_id) if error is None else None
        if consumer_group is not None:
            return self.classic_sync_to_consumer_group(consumer_group, generation_id, member_id,
                                                       protocol_type, protocol_name, instance_id,
                                                       callback)
        group = self.group(group_id) if error is None else None
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is None:
            error = self._validate_sync(group, generation_id, member_id, protocol_type,
                                        protocol_name, instance_id)
        if error is not None:
            return callback(SyncGroupResult(error))
        assert group is not None
        if group.is_(GroupState.EMPTY):
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(GroupState.PREPARING_REBALANCE):
            callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            group.get(member_id).awaiting_sync = callback
            group.pending_sync_members.discard(member_id)
            if group.is_leader(member_id):
                full = {m: assignment.get(m, b"") for m in group.members}
                self.spawn(self._store_assignment(group, generation_id, full))
        elif group.is_(GroupState.STABLE):
            group.pending_sync_members.discard(member_id)
            member = group.get(member_id)
            callback(SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                                     member.assignment))
            self.complete_and_schedule_next_heartbeat_expiration(group, member)

    def _validate_sync(self, group: GroupMetadata, generation_id: int, member_id: str,
                       protocol_type: str | None, protocol_name: str | None,
                       instance_id: str | None) -> ErrorCode | None:
        error = self.validate_generation(group, generation_id, member_id, instance_id)
        if error is not None:
            return error
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    async def _store_assignment(self, group: GroupMetadata, generation_id: int,
                                assignment: dict[str, bytes]) -> None:
        error = await self.manager.store_group(group, assignment)
        # Another member may have joined meanwhile: act only if this generation still completes.
        if not (group.is_(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation_id):
            return
        if error != ErrorCode.NONE:
            self.reset_and_propagate_assignment_error(group, error)
            self.maybe_prepare_rebalance(group, "storing the assignment failed")
            return
        for member_id, data in assignment.items():
            group.members[member_id].assignment = data
        self.propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(GroupState.STABLE, self.time_ms())


__all__ = ["GroupCoordinator", "await_callback"]
