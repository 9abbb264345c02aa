"""Offset index: 8-byte entries (relative offset int32, file position int32), one per index interval.

Each entry names a batch by its last offset, as Kafka does, and points at the batch's file position.
"""

from __future__ import annotations

import struct

from storage.index import Index


class OffsetIndex(Index):
    ENTRY = struct.Struct(">ii")
    KEY = struct.Struct(">i")

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        if not self._buf:
            return self.base_offset
        return self.base_offset + self.entry(self.entries - 1)[0]

    @property
    def last_position(self) -> int:
        return self.entry(self.entries - 1)[1] if self._buf else 0

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._buf and relative <= self.entry(self.entries - 1)[0]:
            raise ValueError(f"offset {offset} is not after the last entry {self.last_offset}")
        self._append_entry(relative, position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below target_offset, else (base, 0)."""
        i = self._largest_lower_bound(target_offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        relative, position = self.entry(i)
        return self.base_offset + relative, position

    def floor_position(self, max_position: int, below_offset: int | None = None) -> int:
        """Position of the last entry at/before max_position whose offset < below_offset, else 0.

        Positions and offsets grow together, so the predicate holds for a prefix: binary search.
        """
        lo, hi, found = 0, self.entries - 1, 0
        while lo <= hi:
            mid = (lo + hi) >> 1
            relative, position = self.entry(mid)
            if position <= max_position and (
                below_offset is None or self.base_offset + relative < below_offset
            ):
                found, lo = position, mid + 1
            else:
                hi = mid - 1
        return found

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= offset."""
        self.truncate_entries(self._largest_lower_bound(offset - 1 - self.base_offset) + 1)

    def sane(self, log_size: int) -> bool:
        """Whole entries, offsets strictly increasing and >= 0, positions increasing and in the log."""
        if not self.well_formed():
            return False
        last_rel, last_pos = -1, -1
        for relative, position in self.ENTRY.iter_unpack(self._buf):
            if relative <= last_rel or position <= last_pos or position >= log_size:
                return False
            last_rel, last_pos = relative, position
        return True
