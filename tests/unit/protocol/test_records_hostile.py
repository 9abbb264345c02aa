"""Hostile record bytes inside CRC-valid batches: every length and count is checked against the
bytes left in its record, so the decoder, and the walk a produce's records get before they are
stored, fail with INVALID_RECORD (Kafka's InvalidRecordException) in time and memory linear in the
input, never walking backwards. What Kafka's DefaultRecord.readFrom reads, both read alike."""

from __future__ import annotations

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    _U32,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    decode_batch,
    encode_batch,
    encode_varint,
    read_batch_header,
    walk_records,
)


def batch_with_records_blob(blob: bytes, count: int) -> bytes:
    """A CRC-valid v2 batch (no compression) whose records section is `blob`, claiming `count`."""
    out = bytearray(HEADER_STRUCT.size + len(blob))
    HEADER_STRUCT.pack_into(out, 0, 0, len(out) - LOG_OVERHEAD, -1, MAGIC_V2, 0, 0,
                            max(count - 1, 0), 1000, 1000, -1, -1, -1, count)
    out[HEADER_STRUCT.size:] = blob
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def record(*fields: bytes | int) -> bytes:
    """A record from its body fields (ints are varints, bytes go as they are), length-prefixed."""
    body = b"".join(encode_varint(f) if isinstance(f, int) else f for f in fields)
    return encode_varint(len(body)) + body


ATTRS = b"\x00"


def decode_error(blob: bytes, count: int = 1) -> KafkaError:
    batch = batch_with_records_blob(blob, count)
    with pytest.raises(KafkaError) as walked:  # a produce's check, before the append
        walk_records(batch, 0, read_batch_header(batch))
    with pytest.raises(KafkaError) as info:
        decode_batch(batch)
    assert walked.value.code == info.value.code
    return info.value


@pytest.mark.parametrize("blob", [
    # key / value runs past the record's end
    record(ATTRS, 0, 0, 50, b"abc", -1, 0),
    record(ATTRS, 0, 0, -1, 9, b"abc", 0),
    # header count negative, or more headers than bytes can hold (the endless loop of the issue)
    record(ATTRS, 0, 0, -1, -1, -3),
    record(ATTRS, 0, 0, -1, -1, 2**31 - 1, -4, b"", -1),
    # header key length negative (moved the decoder backwards), past the end; value past the end
    record(ATTRS, 0, 0, -1, -1, 1, -6, -1),
    record(ATTRS, 0, 0, -1, -1, 1, 40, b"k", -1),
    record(ATTRS, 0, 0, -1, -1, 1, 1, b"k", 30, b"v"),
    # record length negative, past the blob, shorter than its fields, longer than its fields
    encode_varint(-20) + ATTRS + b"\x00\x00\x01\x01\x00",
    encode_varint(500) + ATTRS + b"\x00\x00\x01\x01\x00",
    encode_varint(6) + ATTRS + b"\x00\x00\x02kv\x01\x00",
    encode_varint(8) + ATTRS + b"\x00\x00\x01\x01\x00\x00\x00",
])
def test_malformed_record_is_invalid_record(blob: bytes) -> None:
    assert decode_error(blob).code == ErrorCode.INVALID_RECORD


def test_what_kafka_reads_is_read_alike() -> None:
    """Any negative key, value or header value length is null (Kafka's readFrom tests >= 0), and
    a header key that is not UTF-8 is read with replacement characters (Java's new String)."""
    blob = record(ATTRS, 0, 0, -5, b"", -7, 1, 2, b"\xff\xfe", -9)
    batch = batch_with_records_blob(blob, 1)
    walk_records(batch, 0, read_batch_header(batch))
    [read] = decode_batch(batch)[1]
    assert (read.key, read.value, read.headers) == (None, None, [("\ufffd\ufffd", None)])


def test_record_count_beyond_the_bytes_is_refused_before_decoding() -> None:
    one = record(ATTRS, 0, 0, 1, b"k", 1, b"v", 0)
    error = decode_error(one, count=2**31 - 1)
    assert error.code == ErrorCode.INVALID_RECORD
    assert "cannot fit" in error.message
    assert decode_error(one, count=-3).code == ErrorCode.INVALID_RECORD


def test_well_formed_records_still_decode() -> None:
    blob = record(ATTRS, 2, 0, 1, b"k", -1, 1, 1, b"h", -1) + record(ATTRS, 0, 1, -1, 0, b"", 0)
    _, records = decode_batch(batch_with_records_blob(blob, 2))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (0, 1002, b"k", None, [("h", None)]), (1, 1000, None, b"", [])]


def _check_bounded(blob: bytes, count: int) -> None:
    """Either records whose sizes add up to at most the blob, or INVALID_RECORD: nothing else."""
    try:
        _, records = decode_batch(batch_with_records_blob(blob, count))
    except KafkaError as exc:
        assert exc.code == ErrorCode.INVALID_RECORD
        return
    assert len(records) == count <= len(blob) // MIN_RECORD_SIZE
    payload = sum(len(r.key or b"") + len(r.value or b"") + sum(
        len(k.encode()) + len(v or b"") + 2 for k, v in r.headers) for r in records)
    assert payload <= len(blob)


@settings(max_examples=400, deadline=1000)
@given(st.binary(max_size=300), st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_no_byte_string_makes_the_decoder_loop_or_over_allocate(blob: bytes, count: int) -> None:
    _check_bounded(blob, count)


# Valid records with a few bytes overwritten: close to real input, so deep in the grammar.
_VALID = encode_batch([(b"key", b"value", [("a", b"1"), ("bb", None)], 5),
                       (None, b"v2", [("c", b"")], 6)])[HEADER_STRUCT.size:]


@settings(max_examples=400, deadline=1000)
@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), max_size=4),
       st.integers(min_value=0, max_value=4))
def test_mutated_records_decode_or_fail_cleanly(edits: list[tuple[int, int]], count: int) -> None:
    blob = bytearray(_VALID)
    for index, value in edits:
        blob[index] = value
    _check_bounded(bytes(blob), count)
