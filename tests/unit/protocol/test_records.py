"""Record batch v2 codec: exact bytes, codecs (with independent encoders), validation errors."""

from __future__ import annotations

import gzip
import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    CREATE_TIME,
    GZIP,
    HEADER_SIZE,
    HEADER_STRUCT,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_APPEND_TIME,
    LZ4,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_COUNT_OFFSET,
    RECORDS_OFFSET,
    SNAPPY,
    ZSTD,
    assign_offsets,
    batch_crc_ok,
    decode_batch,
    decode_varint,
    encode_batch,
    encode_varint,
    iter_batches,
    read_batch_header,
    set_max_timestamp,
    size_of_varint,
    validate_produce_records,
)

RECORDS = [
    (b"key-0", b"value-0", [], 1_700_000_000_000),
    (None, b"no key", [("trace", b"abc"), ("empty", None)], 1_700_000_000_005),
    (b"tombstone", None, [], 1_699_999_999_990),  # timestamps may go backwards inside a batch
    (b"big", b"x" * 100_000, [("h", b"")], 1_700_000_000_001),
]


def _batch_fields(buf: bytes) -> dict[str, int]:
    def at(fmt: str, offset: int) -> int:
        return struct.unpack_from(fmt, buf, offset)[0]

    return {
        "base_offset": at(">q", BASE_OFFSET_OFFSET),
        "batch_length": at(">i", BATCH_LENGTH_OFFSET),
        "leader_epoch": at(">i", PARTITION_LEADER_EPOCH_OFFSET),
        "magic": at(">b", MAGIC_OFFSET),
        "crc": at(">I", CRC_OFFSET),
        "attributes": at(">h", ATTRIBUTES_OFFSET),
        "last_offset_delta": at(">i", LAST_OFFSET_DELTA_OFFSET),
        "base_timestamp": at(">q", BASE_TIMESTAMP_OFFSET),
        "max_timestamp": at(">q", MAX_TIMESTAMP_OFFSET),
        "producer_id": at(">q", PRODUCER_ID_OFFSET),
        "producer_epoch": at(">h", PRODUCER_EPOCH_OFFSET),
        "base_sequence": at(">i", BASE_SEQUENCE_OFFSET),
        "record_count": at(">i", RECORD_COUNT_OFFSET),
    }


def test_exact_bytes_of_a_small_uncompressed_batch() -> None:
    buf = encode_batch([(b"k", b"v", [], 1000)])
    expected = bytes.fromhex(
        "0000000000000000"  # baseOffset 0
        "0000003a"  # batchLength 58 = 70 - 12
        "ffffffff"  # partitionLeaderEpoch -1
        "02"  # magic
        "716a6189"  # crc32c of bytes 21..70
        "0000"  # attributes: CreateTime, no codec
        "00000000"  # lastOffsetDelta 0
        "00000000000003e8"  # baseTimestamp 1000
        "00000000000003e8"  # maxTimestamp 1000
        "ffffffffffffffff"  # producerId -1
        "ffff"  # producerEpoch -1
        "ffffffff"  # baseSequence -1
        "00000001"  # recordCount 1
        "10"  # record length 8 (zigzag 16)
        "00"  # attributes
        "00"  # timestampDelta 0
        "00"  # offsetDelta 0
        "02" "6b"  # key length 1, "k"
        "02" "76"  # value length 1, "v"
        "00"  # no headers
    )  # fmt: skip
    assert buf == expected
    assert HEADER_SIZE == RECORDS_OFFSET == 61
    fields = _batch_fields(buf)
    assert fields == {
        "base_offset": 0,
        "batch_length": 58,
        "leader_epoch": -1,
        "magic": 2,
        "crc": crc32c(buf[21:]),
        "attributes": 0,
        "last_offset_delta": 0,
        "base_timestamp": 1000,
        "max_timestamp": 1000,
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        "record_count": 1,
    }
    header = read_batch_header(buf)
    assert (header.size, header.last_offset, header.next_offset) == (70, 0, 1)
    assert batch_crc_ok(buf, 0, header)


def test_header_struct_matches_offsets() -> None:
    buf = encode_batch(
        [(b"a", b"b", [], 5), (b"c", b"d", [], 9)],
        base_offset=77,
        producer_id=12,
        producer_epoch=3,
        base_sequence=40,
        partition_leader_epoch=6,
        is_transactional=True,
    )
    h = read_batch_header(buf)
    fields = _batch_fields(buf)
    assert HEADER_STRUCT.unpack_from(buf) == tuple(fields.values())
    assert (h.base_offset, h.last_offset, h.producer_id, h.producer_epoch) == (77, 78, 12, 3)
    assert (h.base_sequence, h.partition_leader_epoch, h.max_timestamp) == (40, 6, 9)
    assert h.is_transactional and not h.is_control and h.compression == 0


@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4, ZSTD])
def test_round_trip_every_codec(codec: int) -> None:
    buf = encode_batch(RECORDS, base_offset=10, compression=codec)
    header, records = decode_batch(buf)
    assert header.compression == codec and header.record_count == len(RECORDS)
    assert batch_crc_ok(buf, 0, header)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (k, v, h, ts) for k, v, h, ts in RECORDS
    ]
    assert [r.offset for r in records] == [10, 11, 12, 13]
    assert header.max_timestamp == max(ts for *_, ts in RECORDS)
    assert header.base_timestamp == RECORDS[0][3]
    if codec:
        assert len(buf) < 100_000  # the 100 KB of x's did compress


def test_raw_and_xerial_snappy_both_decode() -> None:
    raw = encode_batch(RECORDS, compression=SNAPPY, snappy_xerial=False)
    xerial = encode_batch(RECORDS, compression=SNAPPY)
    assert xerial[RECORDS_OFFSET:].startswith(b"\x82SNAPPY\x00")
    assert not raw[RECORDS_OFFSET:].startswith(b"\x82SNAPPY\x00")
    assert decode_batch(raw)[1] == decode_batch(xerial)[1]


def _rewrap(buf: bytes, codec: int, blob: bytes) -> bytes:
    """Replace a batch's records area with `blob` (written by another library) and fix up CRC."""
    out = bytearray(buf[:RECORDS_OFFSET] + blob)
    struct.pack_into(">i", out, BATCH_LENGTH_OFFSET, len(out) - 12)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(out[ATTRIBUTES_OFFSET:]))
    return bytes(out)


# Independent encoders (the test extra installs them; they are not runtime dependencies).
import lz4.frame as lz4_frame  # noqa: E402
import snappy  # noqa: E402
import zstandard  # noqa: E402


def _xerial(data: bytes) -> bytes:
    out = [b"\x82SNAPPY\x00", struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), 32768):
        block = snappy.compress(data[i : i + 32768])
        out += [struct.pack(">i", len(block)), block]
    return b"".join(out)


@pytest.mark.parametrize(
    ("codec", "compressor"),
    [
        (GZIP, gzip.compress),
        (SNAPPY, lambda d: snappy.compress(d)),  # librdkafka: one raw block
        (SNAPPY, _xerial),  # Java client: xerial framing
        (LZ4, lambda d: lz4_frame.compress(d, block_linked=False)),
        (ZSTD, lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d)),
    ],
)
def test_decodes_blobs_from_other_encoders(codec, compressor) -> None:
    plain = encode_batch(RECORDS)
    buf = _rewrap(plain, codec, compressor(plain[RECORDS_OFFSET:]))
    assert decode_batch(buf)[1] == decode_batch(plain)[1]


def test_lz4_blocks_are_independent_for_java() -> None:
    buf = encode_batch(RECORDS, compression=LZ4)
    flg = buf[RECORDS_OFFSET + 4]
    assert flg & 0x20  # block independence bit


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(n: int) -> None:
    raw = encode_varint(n)
    assert len(raw) == size_of_varint(n)
    assert decode_varint(raw + b"\xff", 0) == (n, len(raw))


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=40)),
            st.one_of(st.none(), st.binary(max_size=300)),
            st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8)))),
            st.integers(min_value=0, max_value=2**41),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_round_trip_property(records) -> None:
    header, decoded = decode_batch(encode_batch(records))
    assert header.record_count == len(records)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == records


def test_assign_offsets_keeps_the_crc_valid() -> None:
    buf = bytearray(encode_batch(RECORDS[:2]))
    assign_offsets(buf, 0, 1234, 7)
    header = read_batch_header(buf)
    assert (header.base_offset, header.partition_leader_epoch) == (1234, 7)
    assert batch_crc_ok(buf, 0, header)
    assert [r.offset for r in decode_batch(buf)[1]] == [1234, 1235]


def test_set_max_timestamp_rewrites_crc_and_timestamps() -> None:
    buf = bytearray(encode_batch(RECORDS[:3], compression=GZIP))
    set_max_timestamp(buf, 0, LOG_APPEND_TIME, 42_000)
    header, records = decode_batch(buf)
    assert header.timestamp_type == LOG_APPEND_TIME and header.max_timestamp == 42_000
    assert header.compression == GZIP
    assert batch_crc_ok(buf, 0, header)
    assert {r.timestamp for r in records} == {42_000}
    set_max_timestamp(buf, 0, CREATE_TIME, 7)  # and back: the records keep their own
    header, records = decode_batch(buf)
    assert (header.timestamp_type, header.max_timestamp, header.compression) == (CREATE_TIME, 7, GZIP)
    assert batch_crc_ok(buf, 0, header)
    assert [r.timestamp for r in records] == [ts for *_, ts in RECORDS[:3]]


def test_iter_batches_stops_at_incomplete_tail() -> None:
    a, b = encode_batch(RECORDS[:1]), encode_batch(RECORDS[:2], base_offset=1)
    buf = a + b + b[:30]
    assert [(pos, h.base_offset) for pos, h in iter_batches(buf)] == [(0, 0), (len(a), 1)]
    assert list(iter_batches(b"")) == []


def _code(buf: bytes, limit: int = 1_000_000) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        validate_produce_records(buf, limit)
    return info.value.code


def _with_header_change(buf: bytes, fmt: str, offset: int, value: int) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt, out, offset, value)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(out[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def test_validate_accepts_several_batches() -> None:
    a, b = encode_batch(RECORDS[:2]), encode_batch(RECORDS[2:3])
    headers = validate_produce_records(a + b, 1_000_000)
    assert [h.record_count for h in headers] == [2, 1]


def test_validate_errors() -> None:
    good = encode_batch(RECORDS[:2])
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    assert _code(bytes(flipped)) == ErrorCode.CORRUPT_MESSAGE  # bad CRC
    assert _code(good[:-3]) == ErrorCode.CORRUPT_MESSAGE  # torn batch
    assert _code(good[:40]) == ErrorCode.CORRUPT_MESSAGE  # torn header
    # A batch cut short after a whole one is left out (Kafka's iterator and trimInvalidBytes);
    # a length or magic no batch can have is corrupt wherever it is.
    for tail in (good[:10], good[:16], good[:40], good[:-1]):
        assert len(validate_produce_records(good + tail, 1_000_000)) == 1
    assert _code(good + _with_header_change(good, ">i", BATCH_LENGTH_OFFSET, 3)) == \
        ErrorCode.CORRUPT_MESSAGE
    assert _code(good + _with_header_change(good, ">b", MAGIC_OFFSET, 7)[:40]) == \
        ErrorCode.CORRUPT_MESSAGE
    assert _code(b"") == ErrorCode.CORRUPT_MESSAGE  # zero batches
    assert _code(good, limit=len(good) - 1) == ErrorCode.MESSAGE_TOO_LARGE
    magic1 = bytearray(good)
    magic1[MAGIC_OFFSET] = 1
    assert _code(bytes(magic1)) == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert _code(bytes(magic1[:20])) == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT  # magic read first
    nonsense = _with_header_change(good, ">i", BATCH_LENGTH_OFFSET, 3)
    assert _code(nonsense) == ErrorCode.CORRUPT_MESSAGE
    no_records = _with_header_change(good, ">i", RECORD_COUNT_OFFSET, 0)
    assert _code(no_records) == ErrorCode.INVALID_RECORD
    bad_delta = _with_header_change(good, ">i", LAST_OFFSET_DELTA_OFFSET, 5)
    assert _code(bad_delta) == ErrorCode.INVALID_RECORD


def test_decode_rejects_garbage_compressed_data() -> None:
    buf = _rewrap(encode_batch(RECORDS[:1]), ZSTD, b"not zstd at all")
    with pytest.raises(KafkaError) as info:
        decode_batch(buf)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
