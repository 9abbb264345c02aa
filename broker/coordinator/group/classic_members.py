"""KIP-848's migration between the two kinds of group (Kafka 4's `group.consumer.migration.policy`):
members that speak the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) in a consumer
group, a classic group with members becoming a consumer group when a member joins it with
ConsumerGroupHeartbeat (upgrade), and a consumer group going back to a classic one when only
classic members are left (downgrade).

A classic member of a consumer group is assigned by the server-side assignor like any other. Its
JoinGroup answers at once with its member epoch as the generation; SyncGroup hands it its current
assignment; a Heartbeat answers REBALANCE_IN_PROGRESS when the group epoch moved or the member has
partitions to revoke or to take, and the member rejoins to move toward its target (an eager
client rejoins owning nothing, which is its revocation).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from broker.coordinator.group.consumer_group import (
    ClassicMember,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.group.consumer_groups import ConsumerGroups, cancel_timers, snapshot
from broker.coordinator.group.delayed import join_key, member_key
from broker.coordinator.group.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GroupMetadata,
    GroupState,
)
from broker.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from broker.logs import get_logger
from protocol import group_records as gr
from protocol.errors import ErrorCode, KafkaError
from timer.timer_task import FunctionTimerTask

log = get_logger("kafka_sim.group_coordinator")
MAX_ASSIGNMENT_VERSION = 3  # ConsumerProtocolAssignment's versions all have the same fields


class ClassicMembers(ConsumerGroups):

    # -- a classic group becomes a consumer group ----------------------------------------------

    def upgrade_to_consumer_group(self, classic: GroupMetadata) -> ConsumerGroup:
        """A ConsumerGroupHeartbeat joins a classic group that has members: with the policy's
        consent and every member on the consumer protocol, the group becomes a consumer group
        whose members keep their assignments (at the classic generation as member epoch) and
        rejoin through the new member's rebalance; GROUP_ID_NOT_FOUND otherwise, as Kafka."""
        group_id = classic.group_id
        if self.config["group.consumer.migration.policy"] not in ("upgrade", "bidirectional"):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group "
                             f"{group_id} to consumer group because the online upgrade is "
                             f"disabled.")
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or classic.protocol_name is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group "
                             f"{group_id} to consumer group because the group does not use the "
                             f"consumer embedded protocol.")
        group = ConsumerGroup(group_id)
        group.group_epoch = group.assignment_epoch = classic.generation_id
        for old in classic.members.values():
            subscription = gr.decode_subscription(old.metadata(classic.protocol_name))
            assignment = gr.decode_assignment(old.assignment)
            if subscription is None or assignment is None:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic "
                                 f"group {group_id} to consumer group because the embedded "
                                 f"consumer protocol is malformed.")
            member = ConsumerGroupMember(
                old.member_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
                set(subscription.topics), instance_id=old.group_instance_id,
                rack_id=subscription.rack_id, member_epoch=classic.generation_id,
                classic=ClassicMember(old.session_timeout_ms, tuple(old.supported_protocols)))
            member.assigned = {t: set(ps) for t, ps in assignment.partitions.items() if ps}
            group.members[member.member_id] = member
            group.target[member.member_id] = {t: set(ps) for t, ps in member.assigned.items()}
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        group.resolve_subscriptions(())
        group.subscription_metadata = self.partition_counts(group.subscribed_topics())
        self._retire(classic)
        self.consumer_groups[group_id] = group
        for member in group.members.values():
            self.schedule_session(group, member)
        log.info("classic group upgraded to a consumer group", group_id=group_id,
                 group_epoch=group.group_epoch, members=len(group.members))
        return group

    def _retire(self, classic: GroupMetadata) -> None:
        """The classic group's members go to the consumer group: their parked JoinGroup and
        SyncGroup are told to rejoin, its timers end with it (Dead), and a new empty classic
        record keeps the group's offsets."""
        for member in list(classic.members.values()):
            classic.maybe_invoke_join_callback(member, JoinGroupResult(
                member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
            classic.maybe_invoke_sync_callback(member, SyncGroupResult(
                ErrorCode.REBALANCE_IN_PROGRESS))
        classic.transition_to(GroupState.DEAD, self.time_ms())
        keeper = GroupMetadata(classic.group_id, current_state_timestamp=self.time_ms())
        keeper.offsets, keeper.pending_txn_offsets = classic.offsets, classic.pending_txn_offsets
        self.manager.groups[classic.group_id] = keeper
        self.join_purgatory.check_and_complete(join_key(classic.group_id))
        for member_id in classic.members:
            self.heartbeat_purgatory.check_and_complete(member_key(classic.group_id, member_id))

    # -- a consumer group goes back to being a classic group -----------------------------------

    def downgrade_to_classic_group(self, group: ConsumerGroup, leaving_member_id: str,
                                   why: str) -> bool:
        """The member leaving (or fenced) is the last one on the consumer protocol, classic
        members remain, and the policy allows: the group becomes a classic group again (its
        generation the group epoch, its members' assignments as they are) and rebalances.
        False when it stays a consumer group."""
        remaining = [m for m in group.members.values() if m.member_id != leaving_member_id]
        if not remaining or not group.all_classic_except(leaving_member_id) or \
                self.config["group.consumer.migration.policy"] not in ("downgrade",
                                                                       "bidirectional"):
            return False
        common = set.intersection(*({name for name, _ in m.classic.protocols}
                                    for m in remaining if m.classic is not None))
        if not common:  # no protocol all of them speak: a classic group could not rebalance
            return False
        self.remove_member(group, leaving_member_id, why)
        for member in group.members.values():
            cancel_timers(member)
        del self.consumer_groups[group.group_id]
        classic = self.manager.groups.get(group.group_id)
        if classic is None or classic.is_(GroupState.DEAD):
            classic = self.manager.groups[group.group_id] = GroupMetadata(
                group.group_id, current_state_timestamp=self.time_ms())
        classic.generation_id = group.group_epoch
        for member in remaining:
            assert member.classic is not None
            protocols = list(member.classic.protocols)
            version = int.from_bytes(protocols[0][1][:2] or b"\0\0", "big", signed=True)
            classic.add(MemberMetadata(
                member.member_id, member.instance_id, member.client_id, member.client_host,
                member.rebalance_timeout_ms, member.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE, protocols, gr.encode_consumer_protocol(
                    {t: sorted(ps) for t, ps in member.assigned.items()},
                    min(max(version, 0), MAX_ASSIGNMENT_VERSION))))
        classic.protocol_name = classic.select_protocol()
        classic.subscribed_topics = classic._compute_subscribed_topics()
        # (a change of kind, not a step of the classic state machine)
        classic.state, classic.current_state_timestamp = GroupState.STABLE, self.time_ms()
        self.spawn(self.manager.store_group(
            classic, {m.member_id: m.assignment for m in classic.members.values()}))
        for member in classic.members.values():
            self.complete_and_schedule_next_heartbeat_expiration(classic, member)
        log.info("consumer group downgraded to a classic group", group_id=group.group_id,
                 generation=classic.generation_id, members=len(classic.members), reason=why)
        self.maybe_prepare_rebalance(classic, f"downgrade of group {group.group_id} from "
                                              f"consumer to classic")
        return True

    # -- JoinGroup -----------------------------------------------------------------------------

    def classic_join_to_consumer_group(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None,
        require_known_member_id: bool, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], callback: Callable[[Any], Any]) -> None:
        """A JoinGroup to a consumer group with members: the member joins (or rejoins) it as a
        classic member, is reconciled at once, and is answered with its member epoch."""
        group_id = group.group_id
        before = snapshot(group)
        try:
            answer = self._classic_join(group, member_id, instance_id, require_known_member_id,
                                        client_id, client_host, rebalance_timeout_ms,
                                        session_timeout_ms, protocol_type, protocols)
        except KafkaError as exc:
            callback(JoinGroupResult(member_id, exc.code))
            return
        if answer.error != ErrorCode.NONE:
            callback(answer)
            return

        async def written() -> None:
            error = await self.write_records(group_id, before)
            callback(answer if error is None else JoinGroupResult(member_id, error))

        self.spawn(written())

    def _classic_join(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                      require_known_member_id: bool, client_id: str, client_host: str,
                      rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                      protocols: list[tuple[str, bytes]]) -> JoinGroupResult:
        subscription = gr.decode_subscription(protocols[0][1]) if protocols else None
        if protocol_type != CONSUMER_PROTOCOL_TYPE or subscription is None:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        unknown = member_id == UNKNOWN_MEMBER_ID
        if unknown:
            member_id = str(uuid.uuid4())
            if require_known_member_id and instance_id is None:
                return JoinGroupResult(member_id, ErrorCode.MEMBER_ID_REQUIRED)
        member = group.members.get(member_id)
        if member is not None and member.classic is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} does not use the classic protocol.")
        if member is None:
            member = ConsumerGroupMember(member_id, client_id, client_host, rebalance_timeout_ms,
                                         set(subscription.topics), instance_id=instance_id)
            self.admit_member(group, member,
                              self._classic_static_predecessor(group, instance_id, unknown))
        elif set(subscription.topics) != member.subscribed_names:
            member.subscribed_names = set(subscription.topics)
            group.bump()
        member.client_id, member.client_host = client_id, client_host
        member.rack_id = subscription.rack_id
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.classic = ClassicMember(session_timeout_ms, tuple(protocols))
        # What the member says it still owns: nothing for an eager client, which revoked all
        self.reconcile_member(group, member, subscription.owned)
        self._expect(group, member, "sync")
        return JoinGroupResult(member_id, ErrorCode.NONE, member.member_epoch,
                               CONSUMER_PROTOCOL_TYPE, protocols[0][0])

    @staticmethod
    def _classic_static_predecessor(group: ConsumerGroup, instance_id: str | None,
                                    unknown: bool) -> ConsumerGroupMember | None:
        """The static member a classic member with the same instance id replaces (a restart);
        FENCED_INSTANCE_ID when the joining member names another member id."""
        if instance_id is None:
            return None
        previous = group.members.get(group.static_members.get(instance_id, ""))
        if previous is not None and not unknown:
            raise KafkaError(ErrorCode.FENCED_INSTANCE_ID, f"Static member with instance id "
                             f"{instance_id} is held by member {previous.member_id}.")
        return previous

    def _expect(self, group: ConsumerGroup, member: ConsumerGroupMember, step: str) -> None:
        """A classic member must sync after its join, and rejoin when told to, within its
        rebalance timeout; otherwise it is fenced (Kafka's join and sync timeouts)."""
        if member.rejoin is not None:
            member.rejoin.cancel()
        group_id, member_id = group.group_id, member.member_id

        def fence() -> None:
            current = self.consumer_groups.get(group_id)
            if current is not None and current.members.get(member_id) is member:
                before = snapshot(current)
                self.member_gone(current, member_id, f"did not {step} within its rebalance "
                                                     f"timeout")
                self.spawn(self.write_records(group_id, before))

        member.rejoin = FunctionTimerTask(member.rebalance_timeout_ms, fence)
        self.timer.add(member.rejoin)

    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerGroupMember:
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.members.get(group.static_members.get(instance_id, ""))
            if member is not None and member.member_id != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
        if member is None or member.classic is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    # -- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------

    def classic_sync_to_consumer_group(
        self, group: ConsumerGroup, generation_id: int, member_id: str,
        protocol_type: str | None, protocol_name: str | None, instance_id: str | None,
        callback: Callable[[Any], Any]) -> None:
        """The member's current assignment, in the version of the consumer protocol it speaks;
        REBALANCE_IN_PROGRESS if the group moved on since its join (it rejoins)."""
        try:
            member = self._classic_member(group, member_id, instance_id)
            assert member.classic is not None
            if generation_id != member.member_epoch:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
            name, metadata = member.classic.protocols[0]
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                    protocol_name is not None and protocol_name != name):
                raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and \
                    member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._expect(group, member, "rejoin")
                raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)
        except KafkaError as exc:
            callback(SyncGroupResult(exc.code))
            return
        if member.rejoin is not None:
            member.rejoin.cancel()
            member.rejoin = None
        self.schedule_session(group, member)
        version = int.from_bytes(metadata[:2] or b"\0\0", "big", signed=True)
        callback(SyncGroupResult(ErrorCode.NONE, CONSUMER_PROTOCOL_TYPE, name,
                                 gr.encode_consumer_protocol(
                                     {t: sorted(ps) for t, ps in member.assigned.items()},
                                     min(max(version, 0), MAX_ASSIGNMENT_VERSION))))

    def classic_heartbeat_to_consumer_group(self, group: ConsumerGroup, member_id: str,
                                            instance_id: str | None,
                                            generation_id: int) -> ErrorCode:
        """REBALANCE_IN_PROGRESS when the member should rejoin: the group epoch moved, it has
        partitions to revoke, or the partitions it waits for are free now."""
        try:
            member = self._classic_member(group, member_id, instance_id)
        except KafkaError as exc:
            return exc.code
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.schedule_session(group, member)
        if (member.member_epoch < group.group_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased(member))):
            if member.rejoin is None:
                self._expect(group, member, "rejoin")
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave_to_consumer_group(self, group: ConsumerGroup,
                                        leaving: list[tuple[str, str | None]]
                                        ) -> list[ErrorCode]:
        """LeaveGroup of classic members (an empty member id with an instance id removes that
        static member); each answered on its own."""
        before = snapshot(group)
        errors = []
        for member_id, instance_id in leaving:
            try:
                if member_id == UNKNOWN_MEMBER_ID and instance_id is not None:
                    member_id = group.static_members.get(instance_id, "")
                member = self._classic_member(group, member_id, instance_id)
            except KafkaError as exc:
                errors.append(exc.code)
                continue
            self.member_gone(group, member.member_id, "left the group")
            errors.append(ErrorCode.NONE)
            if group.group_id not in self.consumer_groups:  # a classic group again
                group = ConsumerGroup(group.group_id)  # (the others' ids are unknown now)
        self.spawn(self.write_records(group.group_id, before))
        return errors
