"""ShareGroup: a KIP-932 share group as its coordinator keeps it. Members subscribe to topics;
the group epoch counts changes of membership and subscriptions, and the `simple` assignor hands
each member its partitions at once (no revocation: records, not partitions, are what members
hold, each under its own acquisition lock at the partition's leader). With more members than a
topic has partitions, several members share one partition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from timer.timer_task import TimerTask

Partitions = dict[str, set[int]]  # topic -> partitions

SIMPLE_ASSIGNOR = "simple"


@dataclass(slots=True)
class ShareGroupMember:
    member_id: str
    client_id: str
    client_host: str
    subscribed: set[str]
    rack_id: str | None = None
    member_epoch: int = 0
    assigned: Partitions = field(default_factory=dict)
    session: TimerTask | None = None  # its session timeout on the timing wheel


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    # Each member's target (its assignment from its next heartbeat on) at the assignment epoch
    target: dict[str, Partitions] = field(default_factory=dict)
    # The subscribed topics' partition counts the last target was computed with
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    # The partitions members were ever given, which may have share state at a share coordinator
    # (Kafka's ShareGroupStatePartitionMetadata): what deleting the group deletes
    state_partitions: Partitions = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ShareGroupState as ShareGroupDescribe names it."""
        return "Stable" if self.members else "Empty"

    def bump(self) -> None:
        self.group_epoch += 1

    def subscribed_topics(self) -> set[str]:
        return set().union(*(m.subscribed for m in self.members.values()))

    def compute_target(self, partition_counts: dict[str, int]) -> None:
        """The `simple` assignor: per topic, its partitions dealt round-robin over the members
        subscribed to it (sorted by id); with more members than partitions, member i gets
        partition i mod n, so every partition is read and members share them."""
        target: dict[str, Partitions] = {m: {} for m in self.members}
        for topic, count in sorted(partition_counts.items()):
            readers = sorted(m.member_id for m in self.members.values() if topic in m.subscribed)
            if not readers or count <= 0:
                continue
            self.state_partitions.setdefault(topic, set()).update(range(count))
            if len(readers) <= count:
                for p in range(count):
                    target[readers[p % len(readers)]].setdefault(topic, set()).add(p)
            else:
                for i, member_id in enumerate(readers):
                    target[member_id].setdefault(topic, set()).add(i % count)
        self.subscription_metadata = dict(partition_counts)
        self.assignment_epoch = self.group_epoch
        self.target = target

    def reconcile(self, member: ShareGroupMember) -> bool:
        """Move the member to its target at once (it holds no partitions to give up first);
        True when its epoch or assignment changed."""
        if member.member_epoch == self.assignment_epoch:
            return False
        member.member_epoch = self.assignment_epoch
        member.assigned = self.target.get(member.member_id, {})
        return True
