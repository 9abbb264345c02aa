"""One topic-partition as its leader sees it: the log, leader epoch, replicas, ISR, high watermark.

On a single broker the ISR is the leader alone, so the high watermark follows the log end offset
as soon as an append is written; followers (the replication issue) will move it instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.log import Log, LogAppendInfo


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    log: Log
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def append_records_as_leader(self, records: bytes | memoryview) -> LogAppendInfo:
        info = self.log.append_as_leader(records, self.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        """HW = the smallest log end offset over the ISR; with the leader alone, its own LEO."""
        new_hw = self.log.log_end_offset
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            return True
        return False
