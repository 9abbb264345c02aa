"""`__transaction_state` records and control records byte for byte as Kafka lays them out."""

from __future__ import annotations

import struct

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.records import decode_batch, read_batch_header
from protocol.transaction_records import (
    ControlType,
    TransactionLogValue,
    TransactionState,
    marker_batch,
    read_control_type,
    read_coordinator_epoch,
    read_transaction_log_key,
    read_transaction_log_value,
    transaction_log_key,
    transaction_log_value,
)


def kafka_string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_key_is_version_prefixed_string():
    key = transaction_log_key("tx-1")
    assert key == b"\x00\x00" + kafka_string("tx-1")
    assert read_transaction_log_key(key) == "tx-1"


def test_value_v0_layout():
    value = TransactionLogValue(4000, 3, 60000, TransactionState.ONGOING,
                                {"b": [2, 0], "a": [1]}, 1700, 1600)
    raw = transaction_log_value(value)
    expected = (b"\x00\x00" + struct.pack(">qhib", 4000, 3, 60000, 1) + struct.pack(">i", 2)
                + kafka_string("a") + struct.pack(">ii", 1, 1)
                + kafka_string("b") + struct.pack(">iii", 2, 0, 2)
                + struct.pack(">qq", 1700, 1600))
    assert raw == expected
    back = read_transaction_log_value(raw)
    assert back == TransactionLogValue(4000, 3, 60000, TransactionState.ONGOING,
                                       {"a": [1], "b": [0, 2]}, 1700, 1600)


def test_empty_state_writes_null_partitions_and_refuses_partitions():
    value = TransactionLogValue(7, 0, 1000, TransactionState.EMPTY, {}, 5, -1)
    raw = transaction_log_value(value)
    assert raw[2 + 8 + 2 + 4 + 1:][:4] == struct.pack(">i", -1)
    assert read_transaction_log_value(raw) == value
    with pytest.raises(ValueError):
        transaction_log_value(TransactionLogValue(7, 0, 1000, TransactionState.EMPTY,
                                                  {"a": [0]}, 5, -1))


def test_flexible_v1_value_is_read():
    # v1: compact string (len+1 uvarint), compact arrays (count+1), a tagged-field count per struct.
    raw = (b"\x00\x01" + struct.pack(">qhib", 9, 1, 30000, 2) + b"\x02"
           + b"\x02t" + b"\x02" + struct.pack(">i", 5) + b"\x00"
           + struct.pack(">qq", 11, 10) + b"\x00")
    assert read_transaction_log_value(raw) == TransactionLogValue(
        9, 1, 30000, TransactionState.PREPARE_COMMIT, {"t": [5]}, 11, 10)


def test_tombstone_and_corrupt_values():
    assert read_transaction_log_value(None) is None
    for bad in (b"", b"\x00", b"\x00\x07abc", b"\x00\x00\x00", b"\x00\x00" + b"\xff" * 20):
        with pytest.raises(KafkaError) as info:
            read_transaction_log_value(bad)
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError):
        read_transaction_log_key(b"\x00\x01" + kafka_string("x"))


def test_state_names_are_kafkas():
    assert [s.kafka_name for s in TransactionState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
        "Dead", "PrepareEpochFence"]


def test_marker_batch_is_a_transactional_control_batch():
    batch = marker_batch(4000, 2, ControlType.COMMIT, coordinator_epoch=5, timestamp=123)
    header = read_batch_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.record_count) == (4000, 2, 1)
    [record] = decode_batch(batch)[1]
    assert record.key == b"\x00\x00\x00\x01"
    assert read_control_type(record.key) == ControlType.COMMIT
    assert read_coordinator_epoch(record.value) == 5
    assert record.timestamp == 123


def test_unknown_control_records_are_skipped_not_fatal():
    assert read_control_type(b"\x00\x00\x00\x07") is None
    assert read_control_type(b"\x00\x01\x00\x00") is None
    assert read_control_type(b"\x00") is None
    with pytest.raises(KafkaError):
        read_coordinator_epoch(b"\x00")
