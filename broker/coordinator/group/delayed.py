"""The coordinator's delayed operations: DelayedJoin (a rebalance waiting for members to rejoin),
InitialDelayedJoin (an empty group's first rebalance waiting for more members) and
DelayedHeartbeat (a member's session expiry). They only call back into the coordinator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.replication.purgatory import DelayedOperation, DelayedOperationPurgatory

if TYPE_CHECKING:
    from broker.coordinator.group.coordinator_base import GroupCoordinatorBase
    from broker.coordinator.group.group_metadata import GroupMetadata


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def member_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("member", group_id, member_id)


class DelayedJoin(DelayedOperation):
    """Completes when every known member has rejoined, or at the group's rebalance timeout."""

    __slots__ = ("coordinator", "group")

    def __init__(self, coordinator: GroupCoordinatorBase, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)

    def on_expiration(self) -> None:
        pass


class InitialDelayedJoin(DelayedJoin):
    """group.initial.rebalance.delay.ms: while new members keep arriving the first rebalance
    waits another delay, up to the rebalance timeout in all; it never completes early."""

    __slots__ = ("purgatory", "configured_delay_ms", "remaining_ms")

    def __init__(self, coordinator: GroupCoordinatorBase, purgatory: DelayedOperationPurgatory,
                 group: GroupMetadata, configured_delay_ms: int, delay_ms: int,
                 remaining_ms: int) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        if self.group.new_member_added and self.remaining_ms != 0:
            self.group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, self.purgatory, self.group,
                                   self.configured_delay_ms, delay, remaining),
                [join_key(self.group.group_id)])
        else:
            super().on_complete()


class DelayedHeartbeat(DelayedOperation):
    """A member's session: completes when it heartbeats (or leaves); expiring removes it."""

    __slots__ = ("coordinator", "group", "member_id", "is_pending")

    def __init__(self, coordinator: GroupCoordinatorBase, group: GroupMetadata, member_id: str,
                 is_pending: bool, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(
            self.group, self.member_id, self.is_pending, self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)
