"""GroupMetadata: one classic group's state machine, members, generation, protocol and offsets.

States and the only transitions allowed into each (Kafka's validPreviousStates):

    PreparingRebalance  <- Stable, CompletingRebalance, Empty   (a member joins, leaves or dies)
    CompletingRebalance <- PreparingRebalance                   (every member joined: leader assigns)
    Stable              <- CompletingRebalance                  (the leader's SyncGroup is stored)
    Empty               <- PreparingRebalance                   (the rebalance ended with no member)
    Dead                <- any                                  (deleted, expired, or unloaded)

Everything that changes a group runs on the event loop's thread, so there are no locks.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from broker.coordinator.group.member import JoinGroupResult, MemberMetadata, SyncGroupResult
from protocol.errors import ErrorCode
from protocol.group_records import subscribed_topics

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateError(RuntimeError):
    """A transition the state machine does not allow: a bug, never a client's fault."""


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None  # only for commits that asked for a retention (v2-4)
    append_offset: int = -1  # where its record is in __consumer_offsets (-1: not known)


@dataclass(slots=True)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    current_state_timestamp: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_sync_members: set[str] = field(default_factory=set)
    num_members_awaiting_join: int = 0
    supported_protocols: Counter = field(default_factory=Counter)
    new_member_added: bool = False
    subscribed_topics: set[str] | None = None
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # TxnOffsetCommit's offsets per producer id, visible only once its commit marker arrives.
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(
        default_factory=dict)

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateError(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.current_state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # -- members ----------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def current_static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def add(self, member: MemberMetadata, callback=None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.supported_protocols.update(member.protocols)
        member.awaiting_join = callback
        if callback is not None:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.supported_protocols.subtract(member.protocols)
        self.supported_protocols += Counter()  # drop zero counts
        if member.awaiting_join is not None:
            self.num_members_awaiting_join -= 1
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int, callback) -> None:
        self.supported_protocols.subtract(member.protocols)
        member.supported_protocols = list(protocols)
        self.supported_protocols.update(member.protocols)
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and member.awaiting_join is None:
            self.num_members_awaiting_join += 1
        elif callback is None and member.awaiting_join is not None:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = callback

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """A static member came back with a new member id: the old id is fenced at once."""
        member = self.members.pop(old_id)
        self.maybe_invoke_join_callback(member, JoinGroupResult(old_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return member

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        if member.awaiting_join is not None:
            callback, member.awaiting_join = member.awaiting_join, None
            self.num_members_awaiting_join -= 1
            callback(result)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        if member.awaiting_sync is None:
            return False
        callback, member.awaiting_sync = member.awaiting_sync, None
        callback(result)
        return True

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined; else hand leadership to any member that did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.is_awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    # -- protocols --------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        return {name for name, n in self.supported_protocols.items() if n == len(self.members)}

    def select_protocol(self) -> str:
        """Each member votes for its favourite protocol that all support; most votes wins."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and any(
            self.supported_protocols[p] == len(self.members) for p in protocols)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self._compute_subscribed_topics()
        self.pending_sync_members.clear()

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            found = subscribed_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    # -- offsets ----------------------------------------------------------------------------

    def has_pending_offset_commits(self, tp: tuple[str, int]) -> bool:
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def complete_pending_txn_offsets(self, producer_id: int, commit: bool) -> int:
        """The producer's transaction ended: its offsets become the group's (commit) or vanish. A
        committed offset whose record is later in the log than the transaction's stays, as Kafka
        orders them by their place in the log."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if commit:
            for tp, om in pending.items():
                current = self.offsets.get(tp)
                if current is None or current.append_offset < om.append_offset:
                    self.offsets[tp] = om
        return len(pending)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Kafka's rules: an empty group's offsets expire `retention_ms` after it became empty; a
        stable consumer group's offsets of topics nobody subscribes to, after their last commit;
        a group without a protocol (offsets only), after their last commit."""
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            base = self.current_state_timestamp
            skip: set[str] = set()
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.is_(GroupState.STABLE)
              and self.subscribed_topics is not None):
            base, skip = None, self.subscribed_topics
        elif self.protocol_type is None:
            base, skip = None, set()
        else:
            return []
        expired = []
        for key, om in self.offsets.items():
            if key[0] in skip:
                continue
            if om.expire_timestamp is not None:
                if now_ms >= om.expire_timestamp:
                    expired.append(key)
            elif now_ms - (om.commit_timestamp if base is None else base) >= retention_ms:
                expired.append(key)
        return expired
