"""ShareSession: the partitions one share consumer fetches from this broker, and the epoch its
next ShareFetch or ShareAcknowledge must carry (KIP-932's share sessions, like KIP-227's fetch
sessions but keyed by group and member). One idle for the group's share.session.timeout.ms goes,
as a closed one does."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from timer.timer_task import TimerTask

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_EPOCH = 2**31 - 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    # (topic id, partition) -> topic name: what every fetch of the session reads
    partitions: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    epoch: int = 1  # what the next request must carry
    expiry: TimerTask | None = None  # it goes when idle this long (a consumer that vanished)

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch == MAX_EPOCH else self.epoch + 1
