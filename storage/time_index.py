"""Time index: 12-byte entries (timestamp int64, relative offset int32); timestamps strictly increase.

Entry (T, o) means: every record up to offset o has a timestamp <= T, and o holds T (per batch).
"""

from __future__ import annotations

import struct

from storage.index import Index


class TimeIndex(Index):
    ENTRY = struct.Struct(">qi")
    KEY = struct.Struct(">q")

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if not self._buf:
            return -1, self.base_offset
        ts, relative = self.entry(self.entries - 1)
        return ts, self.base_offset + relative

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add an entry only when the timestamp grows (Kafka's rule), and while there is room."""
        if self.is_full and not skip_full_check:
            return
        if self._buf:
            last_ts, last_rel = self.entry(self.entries - 1)
            if timestamp <= last_ts or offset - self.base_offset < last_rel:
                return
        self._append_entry(timestamp, offset - self.base_offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target, else (-1, base)."""
        i = self._largest_lower_bound(target_timestamp)
        if i < 0:
            return -1, self.base_offset
        ts, relative = self.entry(i)
        return ts, self.base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Drop entries pointing at offsets >= offset (entries are few; walk back from the end)."""
        count = self.entries
        while count and self.base_offset + self.entry(count - 1)[1] >= offset:
            count -= 1
        self.truncate_entries(count)

    def sane(self, next_offset: int | None = None) -> bool:
        """Whole entries, timestamps strictly increasing, offsets non-decreasing and in range."""
        if not self.well_formed():
            return False
        last_ts, last_rel = None, 0
        for ts, relative in self.ENTRY.iter_unpack(self._buf):
            if relative < last_rel or (last_ts is not None and ts <= last_ts):
                return False
            if next_offset is not None and self.base_offset + relative >= next_offset:
                return False
            last_ts, last_rel = ts, relative
        return True
