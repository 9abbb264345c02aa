"""A partition's full replica assignment while it may be moving (KIP-455): the replicas (RS), and of
them those being added and those being removed, as the topic node stores them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas, and those a reassignment adds and removes (KIP-455)."""
    replicas: list[int]  # RS: during a reassignment, the target replicas first, then the others
    adding: list[int] = field(default_factory=list)  # AR = TRS - ORS
    removing: list[int] = field(default_factory=list)  # RR = ORS - TRS

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin_replicas(self) -> list[int]:
        """ORS: what the partition had before the reassignment began."""
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target_replicas(self) -> list[int]:
        """TRS: what it will have once the reassignment completes."""
        return [r for r in self.replicas if r not in self.removing]

    def reassign_to(self, target: list[int]) -> ReplicaAssignment:
        """The assignment that moves this one's origin replicas to `target`. The target goes first
        (its first replica is the preferred leader from now on); a reassignment that replaces an
        unfinished one starts from the same origin, so a cancellation can restore it."""
        origin = self.origin_replicas
        full = list(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(full, [r for r in full if r not in origin],
                                 [r for r in full if r not in target])
