"""The aborted-transaction index: Kafka's 34-byte entries, ordered appends, truncation, and the
search a read_committed Fetch makes."""

from __future__ import annotations

import struct

import pytest

from storage.naming import transaction_index_file
from storage.transaction_index import AbortedTxn, TransactionIndex


def index(tmp_path, base=0) -> TransactionIndex:
    return TransactionIndex(transaction_index_file(tmp_path, base), base)


def test_entries_are_kafkas_layout_and_survive_reopen(tmp_path):
    idx = index(tmp_path)
    idx.append(AbortedTxn(7, 10, 15, 9))
    idx.append(AbortedTxn(8, 12, 20, 10))
    idx.flush()
    raw = transaction_index_file(tmp_path, 0).read_bytes()
    assert tmp_path.joinpath("00000000000000000000.txnindex").exists()
    assert raw == struct.pack(">hqqqq", 0, 7, 10, 15, 9) + struct.pack(">hqqqq", 0, 8, 12, 20, 10)
    again = index(tmp_path)
    assert list(again) == [AbortedTxn(7, 10, 15, 9), AbortedTxn(8, 12, 20, 10)]
    assert again.well_formed()


def test_appends_must_move_forward(tmp_path):
    idx = index(tmp_path)
    idx.append(AbortedTxn(1, 0, 5, 0))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(2, 3, 5, 0))


def test_truncate_drops_aborts_at_or_after_the_offset(tmp_path):
    idx = index(tmp_path)
    for pid, (first, last) in enumerate([(0, 4), (5, 9), (6, 12)]):
        idx.append(AbortedTxn(pid, first, last, first))
    idx.flush()
    idx.truncate_to(9)
    assert [t.producer_id for t in idx] == [0]
    assert [t.producer_id for t in index(tmp_path)] == [0]


def test_collect_aborted_overlapping_the_fetch_range(tmp_path):
    idx = index(tmp_path)
    idx.append(AbortedTxn(1, 0, 4, 0))
    idx.append(AbortedTxn(2, 3, 10, 3))
    idx.append(AbortedTxn(3, 20, 25, 11))
    found, complete = idx.collect_aborted(5, 15)
    assert [t.producer_id for t in found] == [2] and not complete
    found, complete = idx.collect_aborted(0, 11)
    assert [t.producer_id for t in found] == [1, 2] and complete  # LSO 11 reaches the bound


def test_malformed_files_are_detected(tmp_path):
    path = transaction_index_file(tmp_path, 0)
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 5, 9, 0) + struct.pack(">hqqqq", 0, 2, 6, 8, 0))
    assert not index(tmp_path).well_formed()  # last offsets go backwards
    path.write_bytes(struct.pack(">hqqqq", 1, 1, 5, 9, 0))
    assert not index(tmp_path).well_formed()  # unknown version
    path.write_bytes(b"\x00" * 33)
    assert not index(tmp_path).well_formed()  # a torn entry
