"""The coordinator's KIP-932 side: ShareGroupHeartbeat (join, heartbeat, leave) and
ShareGroupDescribe for share groups, each member's session on the timing wheel.

A part of GroupCoordinator (coordinator.py) on the shared state of GroupCoordinatorBase. The
records members acquire are not the coordinator's: they live with each partition's leader
(broker/share/). What a heartbeat changes is written to `__consumer_offsets` before the answer,
as Kafka 4 writes a share group's records (key versions 10-14), and a coordinator that takes the
partition over rebuilds the groups from them.
"""

from __future__ import annotations

from broker.coordinator.group.consumer_group import (
    ConsumerGroupRecords,
    frozen_partitions,
    record_partitions,
)
from broker.coordinator.group.consumer_groups import HeartbeatAnswer
from broker.coordinator.group.coordinator_base import GroupCoordinatorBase
from broker.coordinator.group.share_group import ShareGroup, ShareGroupMember
from broker.logs import get_logger
from protocol import group_records as gr
from protocol.errors import ErrorCode, KafkaError

log = get_logger("kafka_sim.group_coordinator")

LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroups(GroupCoordinatorBase):

    async def handle_share_group_heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, *, rack_id: str | None,
        subscribed_topics: list[str] | None, client_id: str, client_host: str,
    ) -> HeartbeatAnswer:
        """One heartbeat; raises KafkaError with the code Kafka answers. What it changed is in
        `__consumer_offsets` (acks=-1) before the answer."""
        await self.read_group_configs(group_id)
        before = _snapshot(self.share_groups.get(group_id))
        answer = self._share_heartbeat(group_id, member_id, member_epoch, rack_id,
                                       subscribed_topics, client_id, client_host)
        error = await self._write_share_group(group_id, before)
        if error is not None:
            raise KafkaError(error)
        return answer

    def _share_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                         rack_id: str | None, subscribed_topics: list[str] | None,
                         client_id: str, client_host: str) -> HeartbeatAnswer:
        error = self.validate_group_status(group_id)
        if error is not None:
            raise KafkaError(error)
        if group_id in self.consumer_groups or (
                (classic := self.group(group_id)) is not None and classic.members):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Group {group_id} is not a share group.")
        group = self.share_groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
            self._remove_share_member(group, member_id, "left the group")
            return HeartbeatAnswer(member_id, LEAVE_GROUP_MEMBER_EPOCH, 0, None)
        if member_epoch == 0:
            if not subscribed_topics:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "SubscribedTopicNames must be set in first request.")
            if group is None:
                group = self.share_groups[group_id] = ShareGroup(group_id)
            if member is None:
                if len(group.members) >= self.config["group.share.max.size"]:
                    raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The share group has "
                                     f"reached its maximum capacity of "
                                     f"{self.config['group.share.max.size']} members.")
                member = group.members[member_id] = ShareGroupMember(
                    member_id, client_id, client_host, set(subscribed_topics), rack_id)
                group.bump()
            elif set(subscribed_topics) != member.subscribed:
                member.subscribed = set(subscribed_topics)
                group.bump()
        else:
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch != member.member_epoch:
                raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH, f"The share group member has "
                                 f"a different member epoch ({member_epoch}) than the one known "
                                 f"by the group coordinator ({member.member_epoch}).")
            if subscribed_topics is not None and set(subscribed_topics) != member.subscribed:
                member.subscribed = set(subscribed_topics)
                group.bump()
            if rack_id is not None:
                member.rack_id = rack_id
        counts = self.partition_counts(group.subscribed_topics())
        if counts != group.subscription_metadata and group.group_epoch == group.assignment_epoch:
            group.bump()  # a subscribed topic was created, grew or went
        if group.assignment_epoch < group.group_epoch:
            group.compute_target(counts)
        changed = group.reconcile(member) or member_epoch == 0
        self._schedule_share_session(group, member)
        return HeartbeatAnswer(member_id, member.member_epoch,
                               self.group_setting(group_id, "share.heartbeat.interval.ms"),
                               member.assigned if changed else None)

    def share_group(self, group_id: str) -> ShareGroup:
        """The group ShareGroupDescribe describes; GROUP_ID_NOT_FOUND as Kafka's when it is none
        or not a share group."""
        error = self.validate_group_status(group_id, allow_empty=True)
        if error is not None:
            raise KafkaError(error)
        group = self.share_groups.get(group_id)
        if group is None:
            known = group_id in self.consumer_groups or self.group(group_id) is not None
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Group {group_id} is not a share group." if known
                             else f"Group {group_id} not found.")
        return group

    def _schedule_share_session(self, group: ShareGroup, member: ShareGroupMember) -> None:
        """Restart the member's session timeout (the group's `share.session.timeout.ms`)."""
        def expire(current: ShareGroup) -> None:
            before = _snapshot(current)
            self._remove_share_member(current, member.member_id, "session timed out")
            self.spawn(self._write_share_group(current.group_id, before))

        self.restart_session(self.share_groups, group.group_id, member,
                             "share.session.timeout.ms", expire)

    def _remove_share_member(self, group: ShareGroup, member_id: str, why: str) -> None:
        member = group.members.pop(member_id)
        if member.session is not None:
            member.session.cancel()
        group.target.pop(member_id, None)
        group.bump()
        log.info("share group member removed", group_id=group.group_id, member_id=member_id,
                 reason=why, group_epoch=group.group_epoch)

    def share_state_partitions(self, group_id: str) -> dict[str, set[int]] | None:
        """The partitions an empty share group coordinated here may have share state for (what
        deleting it deletes at the share coordinators first); None for any other group."""
        group = self.share_groups.get(group_id)
        if group is None or group.members or self.validate_group_status(
                group_id, allow_empty=True) is not None:
            return None
        return {t: set(ps) for t, ps in group.state_partitions.items()}

    async def delete_share_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else it goes,
        with tombstones for its records (its share state was deleted first, by the handler)."""
        if self.share_groups[group_id].members:
            return ErrorCode.NON_EMPTY_GROUP
        before = _snapshot(self.share_groups.pop(group_id))
        error = await self._write_share_group(group_id, before) or ErrorCode.NONE
        if error == ErrorCode.NONE:
            log.info("share group deleted", group_id=group_id)
        return error

    # -- the groups' records in __consumer_offsets ---------------------------------------------

    async def _write_share_group(self, group_id: str, before: Snapshot | None
                                 ) -> ErrorCode | None:
        """Append the records of what changed in the group since `before` (acks=-1); the error
        Kafka answers when that fails, else None."""
        records = _records(group_id, before, _snapshot(self.share_groups.get(group_id)),
                           self.topic_id_bytes)
        if not records:
            return None
        error = await self.manager.append_records(group_id, records)
        return None if error == ErrorCode.NONE else error

    def load_share_groups(self, loaded: ConsumerGroupRecords) -> None:
        """A loaded partition's share groups, rebuilt from their records; each member's session
        starts again now."""
        partitions = self.partitions_of

        for group_id, records in loaded.items():
            group = ShareGroup(group_id, records.epoch, records.assignment_epoch)
            for member_id, meta in records.members.items():
                member = ShareGroupMember(member_id, meta.client_id, meta.client_host,
                                          set(meta.subscribed_topic_names), meta.rack_id)
                current = records.current.get(member_id)
                if current is not None:
                    member.member_epoch = current.member_epoch
                    member.assigned = partitions(current.assigned_partitions)
                group.members[member_id] = member
                group.target[member_id] = partitions(
                    records.targets[member_id].topic_partitions
                    if member_id in records.targets else ())
            group.subscription_metadata = self.partition_counts(group.subscribed_topics())
            if records.state_partitions is not None:  # (a topic since deleted is left out)
                group.state_partitions = {
                    t.topic_name: set(t.partitions)
                    for t in records.state_partitions.initialized_topics
                    if self.topic_id_bytes(t.topic_name) == bytes(t.topic_id)}
            self.share_groups[group_id] = group
            for member in group.members.values():
                self._schedule_share_session(group, member)
            log.info("share group loaded", group_id=group_id, group_epoch=group.group_epoch,
                     members=len(group.members))

    def forget_share_groups(self, partition: int) -> None:
        """The coordinator resigned `partition`: its share groups go (their members join the
        new coordinator)."""
        for group_id in [g for g in self.share_groups
                         if self.manager.partition_for(g) == partition]:
            self.forget_share_group(group_id)

    def forget_share_group(self, group_id: str) -> None:
        for member in self.share_groups.pop(group_id).members.values():
            if member.session is not None:
                member.session.cancel()


# A share group as its records describe it: (group epoch, assignment epoch, member metadata,
# target per member, current assignment per member, partitions with share state), each
# comparable between two moments.
Snapshot = tuple[int, int, dict[str, tuple], dict[str, tuple], dict[str, tuple], tuple]


def _snapshot(group: ShareGroup | None) -> Snapshot | None:
    if group is None:
        return None
    return (group.group_epoch, group.assignment_epoch,
            {m.member_id: (m.rack_id, m.client_id, m.client_host, tuple(sorted(m.subscribed)))
             for m in group.members.values()},
            {member_id: frozen_partitions(t) for member_id, t in group.target.items()},
            {m.member_id: (m.member_epoch, frozen_partitions(m.assigned))
             for m in group.members.values()},
            frozen_partitions(group.state_partitions))


def _records(group_id: str, before: Snapshot | None, after: Snapshot | None,
             topic_id) -> list[tuple[bytes, bytes | None]]:
    """The records that take a share group from `before` to `after`, in Kafka's order: a
    member's removal as tombstones, members' metadata, the group epoch, the target assignment,
    then members' current assignments."""
    empty: Snapshot = (-1, -1, {}, {}, {}, ())
    if after is None:  # the group was deleted: tombstones
        if before is None:
            return []
        after = empty
    b_epoch, b_target_epoch, b_meta, b_target, b_current, b_state = before or empty
    epoch, target_epoch, meta, target, current, state = after
    key, value = gr.consumer_group_key, gr.consumer_group_value

    def topic_partitions(frozen: tuple) -> list[dict]:
        return record_partitions(frozen, topic_id)

    records: list[tuple[bytes, bytes | None]] = []
    for member_id in b_meta.keys() - meta.keys():
        for kind in (gr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                     gr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, gr.SHARE_GROUP_MEMBER_METADATA):
            records.append((key(kind, group_id, member_id), None))
    for member_id, m in meta.items():
        if b_meta.get(member_id) != m:
            records.append((key(gr.SHARE_GROUP_MEMBER_METADATA, group_id, member_id), value(
                gr.SHARE_GROUP_MEMBER_METADATA, {"rack_id": m[0], "client_id": m[1],
                                                 "client_host": m[2],
                                                 "subscribed_topic_names": list(m[3])})))
    if after is empty:
        return records + [(key(kind, group_id), None) for kind in (
            gr.SHARE_GROUP_STATE_PARTITION_METADATA, gr.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
            gr.SHARE_GROUP_METADATA)]
    if epoch != b_epoch:
        records.append((key(gr.SHARE_GROUP_METADATA, group_id), value(
            gr.SHARE_GROUP_METADATA, {"epoch": epoch, "metadata_hash": 0})))
    if state != b_state:
        records.append((key(gr.SHARE_GROUP_STATE_PARTITION_METADATA, group_id), value(
            gr.SHARE_GROUP_STATE_PARTITION_METADATA, {"initialized_topics": [
                {"topic_id": tid, "topic_name": t, "partitions": list(ps)}
                for t, ps in state if (tid := topic_id(t)) is not None],
                "deleting_topics": []})))
    for member_id, t in target.items():
        if b_target.get(member_id) != t and member_id in meta:
            records.append((key(gr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                            value(gr.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                  {"topic_partitions": topic_partitions(t)})))
    if target_epoch != b_target_epoch:
        records.append((key(gr.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_id), value(
            gr.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, {"assignment_epoch": target_epoch})))
    for member_id, c in current.items():
        if b_current.get(member_id) != c:
            records.append((key(gr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
                            value(gr.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, {
                                "member_epoch": c[0], "previous_member_epoch": c[0],
                                "state": 0, "assigned_partitions": topic_partitions(c[1])})))
    return records
