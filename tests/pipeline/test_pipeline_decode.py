"""The segment decoder without Spark: torn tails, unreadable lengths, sequence wrap-around."""

from __future__ import annotations

import struct

from pipeline.decode import batch_rows, record_sequence, walk_batches
from protocol.records import BATCH_LENGTH_OFFSET, assign_offsets, encode_batch


def _log(*batches: bytes) -> bytes:
    out, offset = bytearray(), 0
    for raw in batches:
        batch = bytearray(raw)
        assign_offsets(batch, 0, offset, 0)
        offset += struct.unpack_from(">i", batch, 23)[0] + 1
        out += batch
    return bytes(out)


def test_torn_tail_ends_the_walk_silently():
    log = _log(encode_batch([(b"k", b"v", [], 1)]), encode_batch([(b"k", b"w", [], 2)] * 3))
    assert [h.base_offset for _, h in walk_batches(log[:-5])] == [0]
    assert [h.base_offset for _, h in walk_batches(log)] == [0, 1]


def test_unreadable_length_is_reported_once_with_its_position():
    first = encode_batch([(b"k", b"v", [], 1)])
    log = bytearray(_log(first, first, first))
    struct.pack_into(">i", log, len(first) + BATCH_LENGTH_OFFSET, 3)  # shorter than a header
    rows = batch_rows(bytes(log), 1, "t", 0, 0)
    assert rows["position"] == [0, len(first)]
    assert rows["crc_valid"] == [True, False] and rows["base_offset"] == [0, 1]


def test_record_sequences_wrap_like_kafka():
    assert record_sequence(-1, 5) == -1
    assert record_sequence(10, 5) == 15
    assert record_sequence(2**31 - 2, 1) == 2**31 - 1
    assert record_sequence(2**31 - 2, 2) == 0
    assert record_sequence(2**31 - 1, 3) == 2


def test_hostile_record_lengths_fail_the_batch_instead_of_looping():
    """A CRC-valid batch whose header key length is -4 (the decoder walked backwards over 2^31-1
    headers) or whose lengths run past the record fails with ValueError, in linear time."""
    import pyarrow as pa
    import pytest

    from pipeline.decode import record_batches
    from tests.unit.protocol.test_records_hostile import ATTRS, batch_with_records_blob, record

    schema = pa.schema([("offset", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
                        ("headers", pa.list_(pa.struct([("key", pa.string()),
                                                        ("value", pa.binary())])))])
    for blob in (record(ATTRS, 0, 0, 1, b"k", -1, 2**31 - 1, -4, b"", -1),
                 record(ATTRS, 0, 0, -7, -1, 0),
                 record(ATTRS, 0, 0, 40, b"k", -1, 0),
                 record(ATTRS, 0, 0, -1, -1, 1, 1, b"k", -9)):
        with pytest.raises(ValueError):
            list(record_batches(_log(batch_with_records_blob(blob, 1)), schema, {}))
    good = _log(encode_batch([(b"k", b"v", [("h", b"x")], 5)]))
    [rows] = record_batches(good, schema, {})
    assert rows.to_pylist() == [{"offset": 0, "key": b"k", "value": b"v",
                                 "headers": [{"key": "h", "value": b"x"}]}]
