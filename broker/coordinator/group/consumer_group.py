"""ConsumerGroup: a KIP-848 consumer group as its coordinator keeps it. The group epoch counts
changes of membership and subscriptions; the target assignment is computed for it by the
server-side assignor (its assignment epoch); each member moves to its target at its own pace
(reconciliation): it first revokes what it must give up, keeping its member epoch, and only then
gets the new epoch and the partitions no other member still owns."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from broker.coordinator.group.assignors import ASSIGNORS, Assignment
from protocol import group_records as gr

if TYPE_CHECKING:
    from construct import Container

    from timer.timer_task import TimerTask

Partitions = dict[str, set[int]]  # topic -> partitions


class TopicRegex(Protocol):
    pattern: str

    def fullmatch(self, text: str) -> object: ...


def topic_regex(pattern: str) -> TopicRegex:
    """A subscription's regex, in RE2 as Kafka's RE2/J reads it: matching costs time linear in
    the topic name whatever the pattern, so a hostile one cannot hold the loop (Python's `re`
    backtracks). ValueError says why a pattern does not compile."""
    import re2  # loaded with the first regex subscription

    options = re2.Options()
    options.log_errors = False  # (a client's bad pattern is its answer, not the broker's log)
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        message = exc.args[0] if exc.args else exc
        raise ValueError(message.decode() if isinstance(message, bytes) else str(message)) \
            from None


class MemberState(enum.Enum):
    """Kafka's MemberState of a consumer group member (its value is the byte its record keeps)."""
    STABLE = 0  # at the assignment epoch, owning its whole target
    UNREVOKED_PARTITIONS = 1  # must revoke partitions before moving on
    UNRELEASED_PARTITIONS = 2  # at the epoch, waiting for partitions other members still own


@dataclass(slots=True, frozen=True)
class ClassicMember:
    """What a member speaking the classic protocol (JoinGroup, SyncGroup, Heartbeat) in a consumer
    group keeps of it: its session timeout and its protocols, as its JoinGroup gave them."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: set[str]
    subscribed_regex: TopicRegex | None = None  # topics it matches in full are subscribed
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)  # what it owns and may fetch
    revoking: Partitions = field(default_factory=dict)  # what it must give up first
    session: TimerTask | None = None  # its session timeout on the timing wheel
    revocation: TimerTask | None = None  # its rebalance timeout while it has partitions to revoke
    subscribed_topics: set[str] = field(default_factory=set)  # the names and the regex's matches
    # A static member that left with epoch -2: it keeps its assignment for its session timeout,
    # for a member with its instance id to take over (a restart without a rebalance).
    temporarily_left: bool = False
    classic: ClassicMember | None = None  # a classic protocol member (KIP-848's migration)
    # A classic member told to rejoin (or one that joined) must join (sync) within its
    # rebalance timeout, or it is fenced.
    rejoin: TimerTask | None = None


def frozen_partitions(partitions: Partitions) -> tuple:
    """Partitions as a comparable, hashable value (what a group's records are diffed on)."""
    return tuple(sorted((t, tuple(sorted(ps))) for t, ps in partitions.items() if ps))


def record_partitions(frozen: tuple, topic_id) -> list[dict]:
    """Frozen partitions as a record's (topic id, partitions) entries (`topic_id`: a name's id
    as bytes, None for a topic that went)."""
    return [{"topic_id": tid, "partitions": list(ps)} for t, ps in frozen
            if (tid := topic_id(t)) is not None]


def _copy(partitions: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in partitions.items() if ps}


def _minus(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _and(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps & b[t] for t, ps in a.items() if t in b and ps & b[t]}


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: Assignment = {}
        self.assignor = "uniform"
        # Partition counts of the subscribed topics when the target was computed: a change (a
        # topic created or grown) is a new group epoch, as Kafka's subscription metadata.
        self.subscription_metadata: dict[str, int] = {}

    @property
    def state(self) -> str:
        """ConsumerGroupDescribe's group state."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def all_classic_except(self, member_id: str) -> bool:
        """Every member but `member_id` speaks the classic protocol (there may be none)."""
        return all(m.classic is not None for m in self.members.values()
                   if m.member_id != member_id)

    def waiting_on_unreleased(self, member: ConsumerGroupMember) -> bool:
        """A member short of its target waits for partitions another member still owns."""
        missing = _minus(self.target.get(member.member_id, {}), member.assigned)
        return bool(_and(missing, self.owned_elsewhere(member.member_id)))

    def subscribed_topics(self) -> set[str]:
        return set().union(*(m.subscribed_topics for m in self.members.values()))

    def resolve_subscriptions(self, topics: set[str]) -> bool:
        """Each member's topics from its names and its regex over the cluster's `topics`; True
        when one changed (a new group epoch: a topic matching a regex was created or deleted)."""
        changed = False
        for member in self.members.values():
            resolved = set(member.subscribed_names)
            if member.subscribed_regex is not None:
                resolved |= {t for t in topics if member.subscribed_regex.fullmatch(t)}
            if resolved != member.subscribed_topics:
                member.subscribed_topics = resolved
                changed = True
        return changed

    def bump(self) -> None:
        """Membership or subscriptions changed: a new group epoch, a target to compute."""
        self.group_epoch += 1

    def compute_target(self, partitions: dict[str, int], assignor: str) -> None:
        """The target assignment of the current group epoch (`partitions`: the subscribed
        topics that exist, with their partition counts)."""
        self.assignor = assignor
        current = {m: _copy(self.target.get(m, {})) for m in self.members}
        self.target = ASSIGNORS[assignor](
            {m: member.subscribed_topics & partitions.keys() for m, member in self.members.items()},
            partitions, current)
        self.assignment_epoch = self.group_epoch
        self.subscription_metadata = dict(partitions)

    def owned_elsewhere(self, member_id: str) -> Partitions:
        """Partitions other members still own (assigned, or being revoked)."""
        owned: Partitions = {}
        for other in self.members.values():
            if other.member_id == member_id:
                continue
            for source in (other.assigned, other.revoking):
                for t, ps in source.items():
                    owned.setdefault(t, set()).update(ps)
        return owned

    def reconcile(self, member: ConsumerGroupMember, owned: Partitions | None) -> bool:
        """Move `member` toward its target (Kafka's CurrentAssignmentBuilder); `owned` is what the
        member says it owns (None when its request did not say). True when its assignment or
        epoch changed (the response then carries the assignment)."""
        before = (member.member_epoch, _copy(member.assigned))
        if member.revoking:
            if owned is None or _and(owned, member.revoking):
                return False  # not revoked yet: it keeps its epoch and its reduced assignment
            member.revoking = {}
        target = self.target.get(member.member_id, {})
        if member.member_epoch != self.assignment_epoch or \
                member.state is not MemberState.STABLE:
            keep = _and(member.assigned, target)
            revoke = _minus(member.assigned, target)
            if revoke:
                member.assigned, member.revoking = keep, revoke
                member.state = MemberState.UNREVOKED_PARTITIONS
            else:
                free = _minus(_minus(target, keep), self.owned_elsewhere(member.member_id))
                for t, ps in free.items():
                    keep.setdefault(t, set()).update(ps)
                member.assigned = keep
                if member.member_epoch != self.assignment_epoch:
                    member.previous_member_epoch = member.member_epoch
                    member.member_epoch = self.assignment_epoch
                member.state = (MemberState.STABLE if _minus(target, keep) == {}
                                else MemberState.UNRELEASED_PARTITIONS)
        return (member.member_epoch, member.assigned) != before


@dataclass(slots=True)
class LoadedConsumerGroup:
    """A KIP-848 group's latest records in `__consumer_offsets`, as a load replays them (each
    value a decoded record; a tombstone removed its entry)."""
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Container] = field(default_factory=dict)  # member metadata
    targets: dict[str, Container] = field(default_factory=dict)  # target assignment per member
    current: dict[str, Container] = field(default_factory=dict)  # current assignment per member
    share: bool = False  # a share group's records (KIP-932), not a consumer group's
    state_partitions: Container | None = None  # a share group's: where it has share state


ConsumerGroupRecords = dict[str, LoadedConsumerGroup]


def replay_consumer_group_record(record: gr.ConsumerGroupRecord,
                                 groups: ConsumerGroupRecords) -> None:
    """Apply one record, a consumer or a share group's, to what a load has gathered (a worker
    thread may run this)."""
    value, role = record.value, gr.RECORD_ROLES[record.kind]
    if role == gr.GROUP_EPOCH:
        if value is None:  # the group was deleted
            groups.pop(record.group, None)
        else:
            groups.setdefault(record.group, LoadedConsumerGroup()).epoch = value.epoch
    else:
        loaded = groups.setdefault(record.group, LoadedConsumerGroup())
        if role == gr.ASSIGNMENT_EPOCH:
            if value is not None:
                loaded.assignment_epoch = value.assignment_epoch
        elif role == gr.STATE_PARTITIONS:
            loaded.state_partitions = value
        else:
            table = getattr(loaded, role)
            if value is None:
                table.pop(record.member_id, None)
            else:
                table[record.member_id] = value
    if record.group in groups:
        groups[record.group].share = record.kind in gr.SHARE_GROUP_RECORDS
