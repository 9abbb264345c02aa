"""The coordinator's KIP-848 side: ConsumerGroupHeartbeat (join, reconcile, leave, static
members taking over) for consumer groups, with each member's session and revocation deadline on
the timing wheel.

A part of GroupCoordinator (coordinator.py) on the shared state of GroupCoordinatorBase. Each
change is written to `__consumer_offsets` as Kafka 4's records, which a new coordinator loads;
offsets go through the classic group's offset store (OffsetCommit checks the member epoch first).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker.coordinator.group.consumer_group import (
    ClassicMember,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupRecords,
    MemberState,
    Partitions,
    frozen_partitions,
    record_partitions,
    topic_regex,
)
from broker.coordinator.group.coordinator_base import GroupCoordinatorBase
from broker.logs import get_logger
from protocol import group_records as gr
from protocol.errors import ErrorCode, KafkaError
from timer.timer_task import FunctionTimerTask

log = get_logger("kafka_sim.group_coordinator")

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(slots=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Partitions | None  # None: unchanged since the member's last heartbeat


class ConsumerGroups(GroupCoordinatorBase):

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.consumer_groups.get(group_id)

    async def handle_consumer_group_heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, *, instance_id: str | None,
        rack_id: str | None, rebalance_timeout_ms: int, subscribed_topics: list[str] | None,
        server_assignor: str | None, owned: Partitions | None, client_id: str, client_host: str,
        subscribed_regex: str | None = None, describable: Callable[[str], bool] | None = None,
    ) -> HeartbeatAnswer:
        """One heartbeat; raises KafkaError with the code Kafka answers. `owned`: what the
        member says it owns
        (None when its request did not say); `subscribed_regex` "" clears a regex, None leaves
        it as it was. `describable` (an authorizer's, for the request's principal) keeps the
        topics a regex matches to those it may DESCRIBE, as Kafka (KAFKA-18813). What changed is
        written to `__consumer_offsets` (acks=-1) before the answer, as Kafka 4's coordinator
        writes its records."""
        error = self.validate_group_status(group_id)
        if error is not None:
            raise KafkaError(error)
        if group_id in self.share_groups:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Group {group_id} is not a consumer group")
        assignors = self.config["group.consumer.assignors"]
        if server_assignor is not None and server_assignor not in assignors:
            raise KafkaError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {server_assignor} is not supported. Supported "
                             f"assignors: {', '.join(assignors)}")
        await self.read_group_configs(group_id)
        classic = self.group(group_id)
        upgraded = False
        if classic is not None and classic.members and group_id not in self.consumer_groups:
            if member_epoch != 0:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {group_id} is not a consumer group")
            self.upgrade_to_consumer_group(classic)  # (GROUP_ID_NOT_FOUND when it may not)
            upgraded = True
        before = snapshot(None if upgraded else self.consumer_groups.get(group_id))
        try:
            answer = self._heartbeat(group_id, member_id, member_epoch, instance_id, rack_id,
                                     rebalance_timeout_ms, subscribed_topics, server_assignor,
                                     owned, client_id, client_host, subscribed_regex, describable)
        except KafkaError:
            if upgraded:  # the joining member was refused, the upgrade stands: write it
                await self._write_upgrade(group_id, before)
            raise
        if upgraded:
            await self._write_upgrade(group_id, before)
            return answer
        error = await self.write_records(group_id, before)
        if error is not None:
            raise KafkaError(error)
        return answer

    def _heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
        rack_id: str | None, rebalance_timeout_ms: int, subscribed_topics: list[str] | None,
        server_assignor: str | None, owned: Partitions | None, client_id: str, client_host: str,
        subscribed_regex: str | None, describable: Callable[[str], bool] | None = None,
    ) -> HeartbeatAnswer:
        regex = None
        if subscribed_regex:
            try:
                regex = topic_regex(subscribed_regex)
            except ValueError as exc:
                raise KafkaError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex `{subscribed_regex}` is not a valid "
                                 f"regular expression: {exc}.") from None
        group = self.consumer_groups.get(group_id)
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            member = group.members.get(member_id) if group is not None else None
            if group is None or member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}")
            if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and member.instance_id is not None:
                member.temporarily_left = True  # its session timeout still runs
            else:
                self.member_gone(group, member_id, "left the group")
            return HeartbeatAnswer(member_id, member_epoch, 0, None)
        if member_epoch == 0:
            if not subscribed_topics and regex is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames or "
                                 "SubscribedTopicRegex must be set in first request.")
            if rebalance_timeout_ms <= 0:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "RebalanceTimeoutMs must be provided in first request.")
            if group is None:
                group = self.consumer_groups[group_id] = ConsumerGroup(group_id)
            if member_id in group.members:  # it joins again: its old self is gone
                self.remove_member(group, member_id, "joined again")
            member_id = member_id or str(uuid.uuid4())  # v0: the coordinator names it
            member = ConsumerGroupMember(
                member_id, client_id, client_host, rebalance_timeout_ms,
                set(subscribed_topics or ()), regex, instance_id=instance_id, rack_id=rack_id,
                server_assignor=server_assignor)
            self.admit_member(group, member, self.static_predecessor(group, instance_id))
        else:
            member = group.members.get(member_id) if group is not None else None
            if group is None or member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}")
            self._check_member_epoch(member, member_epoch, owned)
            if subscribed_topics is not None and set(subscribed_topics) != member.subscribed_names:
                member.subscribed_names = set(subscribed_topics)
                group.bump()
            if subscribed_regex is not None and regex != member.subscribed_regex:
                member.subscribed_regex = regex  # ("" clears it)
                group.bump()
            if server_assignor is not None and server_assignor != member.server_assignor:
                member.server_assignor = server_assignor
                group.bump()
            if rebalance_timeout_ms > 0:
                member.rebalance_timeout_ms = rebalance_timeout_ms
        changed = self.reconcile_member(group, member, owned, describable)
        full = member_epoch == 0 or owned is not None
        return HeartbeatAnswer(member.member_id, member.member_epoch,
                               self.group_setting(group_id, "consumer.heartbeat.interval.ms"),
                               member.assigned if changed or full else None)

    async def _write_upgrade(self, group_id: str, before: Snapshot | None) -> None:
        """The records of a classic group become a consumer group: the classic group's record
        goes (its offsets stay), the consumer group's records come."""
        error = await self.manager.append_records(group_id, [
            (gr.group_metadata_key(group_id), None)])
        if error == ErrorCode.NONE:
            error = await self.write_records(group_id, before) or ErrorCode.NONE
        if error != ErrorCode.NONE:
            raise KafkaError(error)

    def reconcile_member(self, group: ConsumerGroup, member: ConsumerGroupMember,
                         owned: Partitions | None,
                         describable: Callable[[str], bool] | None = None) -> bool:
        """After a member's request: the subscriptions resolved again, a new target if the group
        epoch moved, the member moved toward its target (True when its assignment or epoch
        changed), and its session and revocation deadline restarted."""
        regexes = any(m.subscribed_regex is not None for m in group.members.values())
        if group.resolve_subscriptions(self._topic_names(describable) if regexes else ()) \
                and group.group_epoch == group.assignment_epoch:
            group.bump()  # a topic matching a member's regex came or went
        subscribed = self.partition_counts(group.subscribed_topics())
        if subscribed != group.subscription_metadata \
                and group.group_epoch == group.assignment_epoch:
            group.bump()  # a subscribed topic was created or grew
        if group.assignment_epoch < group.group_epoch:
            group.compute_target(subscribed, self._assignor_of(group))
        changed = group.reconcile(member, owned)
        self.schedule_session(group, member)
        self._watch_revocation(group, member)
        return changed

    def admit_member(self, group: ConsumerGroup, member: ConsumerGroupMember,
                     previous: ConsumerGroupMember | None) -> None:
        """A joining member enters the group: in place of the static member it takes over (its
        assignment and epoch; a new group epoch only if it subscribes otherwise), else as a new
        member (a new group epoch)."""
        if previous is not None:  # it takes over, assignment and epoch: no rebalance
            self.replace_static_member(group, previous, member)
            if (member.subscribed_names, member.subscribed_regex) != (
                    previous.subscribed_names, previous.subscribed_regex):
                group.bump()
        else:
            group.members[member.member_id] = member
            group.bump()
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id

    @staticmethod
    def static_predecessor(group: ConsumerGroup, instance_id: str | None
                            ) -> ConsumerGroupMember | None:
        """The member a joining static member replaces; UNRELEASED_INSTANCE_ID while the one
        holding its instance id has not left."""
        if instance_id is None:
            return None
        previous = group.members.get(group.static_members.get(instance_id, ""))
        if previous is None:
            return None
        if not previous.temporarily_left:
            raise KafkaError(ErrorCode.UNRELEASED_INSTANCE_ID,
                             f"Static member {previous.member_id} with instance id {instance_id} "
                             f"cannot be replaced because it has not left the group.")
        return previous

    def replace_static_member(self, group: ConsumerGroup, previous: ConsumerGroupMember,
                               member: ConsumerGroupMember) -> None:
        cancel_timers(previous)
        del group.members[previous.member_id]
        member.member_epoch, member.previous_member_epoch = (previous.member_epoch,
                                                             previous.previous_member_epoch)
        member.state, member.assigned, member.revoking = (previous.state, previous.assigned,
                                                          previous.revoking)
        member.subscribed_topics = previous.subscribed_topics  # resolved again if it differs
        group.members[member.member_id] = member
        if previous.member_id in group.target:
            group.target[member.member_id] = group.target.pop(previous.member_id)
        log.info("static consumer group member replaced", group_id=group.group_id,
                 instance_id=member.instance_id, previous=previous.member_id,
                 member_id=member.member_id)

    def _assignor_of(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for, else the first configured (Kafka's choice)."""
        asked = [m.server_assignor for m in group.members.values() if m.server_assignor]
        if asked:
            return max(sorted(set(asked)), key=asked.count)
        return self.config["group.consumer.assignors"][0]

    @staticmethod
    def _check_member_epoch(member: ConsumerGroupMember, epoch: int,
                            owned: Partitions | None) -> None:
        """Kafka's throwIfMemberEpochIsInvalid: an epoch ahead is fenced; one behind is taken
        only when it is the member's previous one and it owns nothing it should not (its
        answer to the last heartbeat was lost)."""
        if epoch > member.member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a "
                             f"greater member epoch ({epoch}) than the one known by the group "
                             f"coordinator ({member.member_epoch}).")
        if epoch < member.member_epoch:
            fits = owned is not None and all(
                ps <= member.assigned.get(t, set()) for t, ps in owned.items())
            if epoch != member.previous_member_epoch or not fits:
                raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has "
                                 f"a smaller member epoch ({epoch}) than the one known by the "
                                 f"group coordinator ({member.member_epoch}).")

    def schedule_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Restart the member's session timeout (the group's `consumer.session.timeout.ms`)."""
        def expire(current: ConsumerGroup) -> None:
            before = snapshot(current)
            self.member_gone(current, member.member_id, "session timed out")
            self.spawn(self.write_records(current.group_id, before))

        self.restart_session(self.consumer_groups, group.group_id, member,
                             "consumer.session.timeout.ms", expire,
                             member.classic.session_timeout_ms if member.classic else None)

    def _watch_revocation(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A member told to revoke partitions must do so within its rebalance timeout, or it is
        fenced (removed), as Kafka's coordinator does: the others are not held forever."""
        if not member.revoking:
            if member.revocation is not None:
                member.revocation.cancel()
                member.revocation = None
            return
        if member.revocation is not None:
            return
        group_id, member_id = group.group_id, member.member_id

        def fence() -> None:
            current = self.consumer_groups.get(group_id)
            if current is not None and current.members.get(member_id) is member and member.revoking:
                before = snapshot(current)
                self.member_gone(current, member_id,
                                 "did not revoke within its rebalance timeout")
                self.spawn(self.write_records(group_id, before))

        member.revocation = FunctionTimerTask(member.rebalance_timeout_ms, fence)
        self.timer.add(member.revocation)

    def member_gone(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        """A member leaves, or is fenced: when only classic members stay, the group may go back
        to being a classic group (downgrade_to_classic_group)."""
        if not self.downgrade_to_classic_group(group, member_id, why):
            self.remove_member(group, member_id, why)

    def remove_member(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        member = group.members.pop(member_id)
        cancel_timers(member)
        group.target.pop(member_id, None)
        if member.instance_id is not None and \
                group.static_members.get(member.instance_id) == member_id:
            del group.static_members[member.instance_id]
        group.bump()
        log.info("consumer group member removed", group_id=group.group_id, member_id=member_id,
                 reason=why, group_epoch=group.group_epoch)

    # -- the groups' records in __consumer_offsets ---------------------------------------------

    async def write_records(self, group_id: str, before: Snapshot | None) -> ErrorCode | None:
        """Append the records of what changed in the group since `before` (acks=-1); the error
        Kafka answers when that fails, else None."""
        group = self.consumer_groups.get(group_id)
        records = _records(group_id, before, snapshot(group), self.topic_id_bytes)
        if not records:
            return None
        error = await self.manager.append_records(group_id, records)
        return None if error == ErrorCode.NONE else error

    def _topic_names(self, describable: Callable[[str], bool] | None = None) -> list[str]:
        """The topics a regex may match: all but the internal ones (and, with `describable`,
        those the heartbeat's principal may describe)."""
        return [n for n, t in self.manager.cache.topics.items()
                if not t.internal and (describable is None or describable(n))]

    def load_consumer_groups(self, loaded: ConsumerGroupRecords) -> None:
        """A loaded partition's KIP-848 groups, rebuilt from their records; each member's session
        starts again now (as Kafka's coordinator does on load). Share groups' records go to
        load_share_groups."""
        self.load_share_groups({g: r for g, r in loaded.items() if r.share})
        loaded = {g: r for g, r in loaded.items() if not r.share}
        partitions = self.partitions_of

        for group_id, records in loaded.items():
            group = ConsumerGroup(group_id)
            group.group_epoch, group.assignment_epoch = records.epoch, records.assignment_epoch
            for member_id, meta in records.members.items():
                regex = meta.subscribed_topic_regex
                member = ConsumerGroupMember(
                    member_id, meta.client_id, meta.client_host, meta.rebalance_timeout_ms,
                    set(meta.subscribed_topic_names), topic_regex(regex) if regex else None,
                    instance_id=meta.instance_id, rack_id=meta.rack_id,
                    server_assignor=meta.server_assignor)
                classic = meta.get("classic_member_metadata")
                if classic is not None:
                    member.classic = ClassicMember(classic.session_timeout_ms, tuple(
                        (p.name, bytes(p.metadata)) for p in classic.supported_protocols))
                current = records.current.get(member_id)
                if current is not None:
                    member.member_epoch = current.member_epoch
                    member.previous_member_epoch = current.previous_member_epoch
                    member.state = MemberState(current.state)
                    member.assigned = partitions(current.assigned_partitions)
                    member.revoking = partitions(current.partitions_pending_revocation)
                group.members[member_id] = member
                if member.instance_id is not None:
                    group.static_members[member.instance_id] = member_id
                group.target[member_id] = partitions(
                    records.targets[member_id].topic_partitions
                    if member_id in records.targets else ())
            # The subscriptions as the target saw them: no new epoch unless a topic changed since.
            group.resolve_subscriptions(self._topic_names())
            group.subscription_metadata = self.partition_counts(group.subscribed_topics())
            self.consumer_groups[group_id] = group
            for member in group.members.values():
                self.schedule_session(group, member)
            log.info("consumer group loaded", group_id=group_id, group_epoch=group.group_epoch,
                     members=len(group.members))

    async def delete_consumer_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a KIP-848 group: NON_EMPTY_GROUP while it has members; else it goes,
        with tombstones for its records (its offsets go with the classic path)."""
        group = self.consumer_groups[group_id]
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        before = snapshot(group)
        del self.consumer_groups[group_id]
        error = await self.write_records(group_id, before) or ErrorCode.NONE
        if error == ErrorCode.NONE:
            log.info("consumer group deleted", group_id=group_id)
        return error

    def give_way_to_classic_group(self, group_id: str) -> None:
        """A JoinGroup to an empty consumer group: it goes at once (its records as tombstones),
        and the classic group the JoinGroup makes takes the id."""
        before = snapshot(self.consumer_groups.pop(group_id))
        self.spawn(self.write_records(group_id, before))

    def forget_consumer_groups(self, partition: int) -> None:
        """The coordinator resigned `partition`: its consumer groups go (members rejoin at the
        new coordinator, whose groups start afresh)."""
        for group_id in [g for g in self.consumer_groups
                         if self.manager.partition_for(g) == partition]:
            self.forget_consumer_group(group_id)

    def forget_consumer_group(self, group_id: str) -> None:
        for member in self.consumer_groups.pop(group_id).members.values():
            cancel_timers(member)


def cancel_timers(member: ConsumerGroupMember) -> None:
    for task in (member.session, member.revocation, member.rejoin):
        if task is not None:
            task.cancel()


# A group as its records describe it: (group epoch, assignment epoch, member metadata, target
# per member, current assignment per member), each part comparable between two moments.
Snapshot = tuple[int, int, dict[str, tuple], dict[str, tuple], dict[str, tuple]]


def snapshot(group: ConsumerGroup | None) -> Snapshot | None:
    if group is None:
        return None
    return (group.group_epoch, group.assignment_epoch,
            {m.member_id: (m.instance_id, m.rack_id, m.client_id, m.client_host,
                           tuple(sorted(m.subscribed_names)),
                           m.subscribed_regex.pattern if m.subscribed_regex else None,
                           m.rebalance_timeout_ms, m.server_assignor, m.classic)
             for m in group.members.values()},
            {member_id: frozen_partitions(t) for member_id, t in group.target.items()},
            {m.member_id: (m.member_epoch, m.previous_member_epoch, m.state.value,
                           frozen_partitions(m.assigned), frozen_partitions(m.revoking))
             for m in group.members.values()})


def _records(group_id: str, before: Snapshot | None, after: Snapshot | None,
             topic_id) -> list[tuple[bytes, bytes | None]]:
    """The records that take a group from `before` to `after`, in Kafka's order: a member's
    removal as tombstones (current assignment, target, metadata), members' metadata, the group
    epoch, the target assignment, then members' current assignments."""
    empty: Snapshot = (-1, -1, {}, {}, {})
    if after is None:  # the group went (deleted, or a classic group again): tombstones
        if before is None:
            return []
        after = empty
    b_epoch, b_target_epoch, b_meta, b_target, b_current = before or empty
    epoch, target_epoch, meta, target, current = after
    key, value = gr.consumer_group_key, gr.consumer_group_value

    def topic_partitions(frozen: tuple) -> list[dict]:
        return record_partitions(frozen, topic_id)

    records: list[tuple[bytes, bytes | None]] = []
    for member_id in b_meta.keys() - meta.keys():
        for kind in (gr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                     gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                     gr.CONSUMER_GROUP_MEMBER_METADATA):
            records.append((key(kind, group_id, member_id), None))
    for member_id, m in meta.items():
        if b_meta.get(member_id) != m:
            records.append((key(gr.CONSUMER_GROUP_MEMBER_METADATA, group_id, member_id), value(
                gr.CONSUMER_GROUP_MEMBER_METADATA, {
                    "instance_id": m[0], "rack_id": m[1], "client_id": m[2], "client_host": m[3],
                    "subscribed_topic_names": list(m[4]), "subscribed_topic_regex": m[5],
                    "rebalance_timeout_ms": m[6], "server_assignor": m[7],
                    "classic_member_metadata": None if m[8] is None else {
                        "session_timeout_ms": m[8].session_timeout_ms,
                        "supported_protocols": [{"name": n, "metadata": md}
                                                for n, md in m[8].protocols]}})))
    if after is empty:
        return records + [
            (key(gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id), None),
            (key(gr.CONSUMER_GROUP_METADATA, group_id), None)]
    if epoch != b_epoch:
        records.append((key(gr.CONSUMER_GROUP_METADATA, group_id),
                        value(gr.CONSUMER_GROUP_METADATA, {"epoch": epoch})))
    for member_id, t in target.items():
        if b_target.get(member_id) != t and member_id in meta:
            records.append((key(gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                            value(gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                  {"topic_partitions": topic_partitions(t)})))
    if target_epoch != b_target_epoch:
        records.append((key(gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
                        value(gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                              {"assignment_epoch": target_epoch})))
    for member_id, c in current.items():
        if b_current.get(member_id) != c:
            records.append((key(gr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
                            value(gr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {
                                "member_epoch": c[0], "previous_member_epoch": c[1],
                                "state": c[2], "assigned_partitions": topic_partitions(c[3]),
                                "partitions_pending_revocation": topic_partitions(c[4])})))
    return records
