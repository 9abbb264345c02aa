"""What a log append or read reports back (Kafka's LogAppendInfo and FetchDataInfo), and where an
offset lies in the log (LogOffsetMetadata)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protocol.file_region import FileRegion


@dataclass(slots=True)
class LogAppendInfo:
    """What an append wrote: offsets, timestamps, sizes."""
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 with CreateTime
    max_timestamp: int
    offset_of_max_timestamp: int
    valid_bytes: int
    num_records: int
    duplicate: bool = False  # a retried idempotent batch: the offsets are the original append's


@dataclass(slots=True)
class FetchDataInfo:
    """What a read returned: the bytes and where in the log they start."""
    fetch_offset: int
    records: bytes | FileRegion
    segment_base_offset: int = -1  # where the returned bytes start: segment and file position
    position: int = -1


@dataclass(slots=True)
class LogOffsetMetadata:
    """Where an offset lies in the log: its segment and the file position of its batch (Kafka's
    LogOffsetMetadata). A parked fetch compares the position of its fetch offset with that of the
    offset it may read up to, instead of reading the bytes between."""
    message_offset: int
    segment_base_offset: int
    relative_position: int

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        return self.segment_base_offset < that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes from `that` to this one, both on one segment."""
        return self.relative_position - that.relative_position
