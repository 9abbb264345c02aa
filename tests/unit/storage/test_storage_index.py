"""Offset and time indexes: binary search, truncation, persistence, sanity checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.offset_index import OffsetIndex
from storage.time_index import TimeIndex


def test_offset_index_lookup_and_persistence(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    assert index.lookup(150) == (100, 0)  # empty: start of the segment
    for i in range(1, 50):
        index.append(100 + 3 * i, 70 * i)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(103) == (103, 70)
    assert index.lookup(105) == (103, 70)
    assert index.lookup(10_000) == (247, 3430)
    with pytest.raises(ValueError):
        index.append(200, 9999)  # offsets must grow
    index.flush()
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 49 * 8
    again = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    assert again.entries == 49 and again.lookup(150) == index.lookup(150)
    assert again.sane(log_size=10_000) and not again.sane(log_size=3000)


def test_offset_index_truncate_and_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 8 * 4 + 5)  # room for 4 entries
    for i in range(4):
        index.append(10 * (i + 1), 100 * (i + 1))
    assert index.is_full
    index.flush()
    index.truncate_to(30)  # drops 30 and 40
    assert index.entries == 2 and index.last_offset == 20
    assert (tmp_path / "0.index").stat().st_size == 16
    index.append(25, 250)
    index.flush()
    assert OffsetIndex(tmp_path / "0.index", 0, 64).lookup(26) == (25, 250)


def test_offset_index_rejects_garbage(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(b"\x01" * 13)
    assert not OffsetIndex(path, 0, 1024).sane(1 << 20)
    path.write_bytes(bytes.fromhex("00000005 00000010 00000002 00000020"))
    assert not OffsetIndex(path, 0, 1024).sane(1 << 20)  # offsets go backwards


def test_time_index(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "0.timeindex", 50, 12 * 10)
    assert index.last_entry == (-1, 50) and index.lookup(5) == (-1, 50)
    index.maybe_append(1000, 55)
    index.maybe_append(1000, 56)  # same timestamp: skipped
    index.maybe_append(900, 57)  # older: skipped
    index.maybe_append(2000, 60)
    assert index.entries == 2 and index.last_entry == (2000, 60)
    assert index.lookup(999) == (-1, 50)
    assert index.lookup(1500) == (1000, 55)
    assert index.lookup(2000) == (2000, 60)
    index.flush()
    again = TimeIndex(tmp_path / "0.timeindex", 50, 120)
    assert again.sane(next_offset=61) and not again.sane(next_offset=60)
    again.truncate_to(60)
    assert again.last_entry == (1000, 55)
    assert (tmp_path / "0.timeindex").stat().st_size == 12
