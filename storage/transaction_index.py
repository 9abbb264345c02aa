"""Transaction index (`.txnindex` beside a segment): one 34-byte entry per transaction aborted in
the segment — version int16, producer id, first offset, last offset, the last stable offset when the
abort was written (int64 each) — appended in the order of the abort markers, so last offsets grow.

A read_committed Fetch collects the entries overlapping its range to tell the client which
records to drop; the last stable offsets tell when no earlier segment can hold more.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.index import Index

VERSION = 0
_NO_SIZE_LIMIT = 1 << 62  # aborts are rare: the file is not preallocated or capped as the indexes


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    """An aborted transaction's entry in the transaction index."""
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the abort marker
    last_stable_offset: int


class TransactionIndex(Index):
    ENTRY = struct.Struct(">hqqqq")
    KEY = struct.Struct(">h")  # entries are scanned, never searched by key

    def __init__(self, path: Path, base_offset: int, *, fresh: bool = False) -> None:
        super().__init__(path, base_offset, _NO_SIZE_LIMIT, fresh=fresh)

    def __iter__(self) -> Iterator[AbortedTxn]:
        for i in range(self.entries):
            _, producer_id, first, last, lso = self.entry(i)
            yield AbortedTxn(producer_id, first, last, lso)

    @property
    def last_offset(self) -> int | None:
        return self.entry(self.entries - 1)[3] if self.entries else None

    def append(self, txn: AbortedTxn) -> None:
        last = self.last_offset
        if last is not None and txn.last_offset <= last:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} is not after {last}")
        self._append_entry(VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                           txn.last_stable_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of aborts at or after `offset` (the log is truncated there)."""
        keep = 0
        while keep < self.entries and self.entry(keep)[3] < offset:
            keep += 1
        self.truncate_entries(keep)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int
                        ) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset), and whether the
        search may stop here: an entry whose last stable offset reaches the bound proves every
        transaction still open at the bound began in this segment or later."""
        found: list[AbortedTxn] = []
        for txn in self:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    # Most segments never see an abort: they get no file (and no stat for one at each flush).
    def flush(self) -> None:
        if self.entries or self.existed:
            super().flush()
            self.existed = True

    def write_appended(self) -> bool:
        if not (self.entries or self.existed):
            return False
        self.existed = True
        return super().write_appended()

    def well_formed(self) -> bool:
        if not super().well_formed():
            return False
        last = None
        for i in range(self.entries):
            version, _, first, end, _ = self.entry(i)
            if version != VERSION or first > end or (last is not None and end <= last):
                return False
            last = end
        return True
