"""The coordinator's KIP-932 side: ShareGroupHeartbeat (join, heartbeat, leave) and
ShareGroupDescribe for share groups, each member's session on the timing wheel.

A part of GroupCoordinator (coordinator.py) on the shared state of GroupCoordinatorBase. The
records members acquire are not the coordinator's: they live with each partition's leader
(broker/share/). Share groups are kept in memory: after a coordinator move their members join
again (UNKNOWN_MEMBER_ID), which costs them nothing, since they own no partitions.
"""

from __future__ import annotations

from broker.coordinator.group.consumer_groups import HeartbeatAnswer
from broker.coordinator.group.coordinator_base import GroupCoordinatorBase
from broker.coordinator.group.share_group import ShareGroup, ShareGroupMember
from broker.logs import get_logger
from protocol.errors import ErrorCode, KafkaError
from timer.timer_task import FunctionTimerTask

log = get_logger("kafka_sim.group_coordinator")

LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroups(GroupCoordinatorBase):

    async def handle_share_group_heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, *, rack_id: str | None,
        subscribed_topics: list[str] | None, client_id: str, client_host: str,
    ) -> HeartbeatAnswer:
        """One heartbeat; raises KafkaError with the code Kafka answers."""
        error = self.validate_group_status(group_id)
        if error is not None:
            raise KafkaError(error)
        if group_id in self.consumer_groups or (
                (classic := self.group(group_id)) is not None and classic.members):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Group {group_id} is not a share group.")
        await self.read_group_configs(group_id)
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
        counts = self._share_partition_counts(group.subscribed_topics())
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

    def _share_partition_counts(self, names: set[str]) -> dict[str, int]:
        topics = self.manager.cache.topics
        return {n: topics[n].num_partitions for n in names
                if n in topics and not topics[n].internal}

    def _schedule_share_session(self, group: ShareGroup, member: ShareGroupMember) -> None:
        """Restart the member's session timeout (the group's `share.session.timeout.ms`)."""
        if member.session is not None:
            member.session.cancel()
        group_id, member_id = group.group_id, member.member_id

        def expire() -> None:
            current = self.share_groups.get(group_id)
            if current is not None and current.members.get(member_id) is member:
                self._remove_share_member(current, member_id, "session timed out")

        member.session = FunctionTimerTask(
            self.group_setting(group_id, "share.session.timeout.ms"), expire)
        self.timer.add(member.session)

    def _remove_share_member(self, group: ShareGroup, member_id: str, why: str) -> None:
        member = group.members.pop(member_id)
        if member.session is not None:
            member.session.cancel()
        group.target.pop(member_id, None)
        group.bump()
        log.info("share group member removed", group_id=group.group_id, member_id=member_id,
                 reason=why, group_epoch=group.group_epoch)

    def delete_share_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members."""
        if self.share_groups[group_id].members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.share_groups[group_id]
        log.info("share group deleted", group_id=group_id)
        return ErrorCode.NONE

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
