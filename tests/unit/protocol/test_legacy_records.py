"""Message sets of magic 0 and 1 (Produce v0-2, Fetch v0-3): read into one magic-2 batch with
their keys, values and timestamps, compressed wrappers opened; bad input refused with Kafka's
codes; magic-2 batches down-converted and read back."""

from __future__ import annotations

import struct
import zlib

import pytest

from protocol.compression import compress
from protocol.compression_type import GZIP, SNAPPY
from protocol.errors import ErrorCode, KafkaError
from protocol.legacy_records import read_message_set, to_message_set, to_record_batch
from protocol.records import decode_batch, encode_batch, iter_batches

LIMIT = 1 << 20


def message(magic: int, key: bytes | None, value: bytes | None, *, offset: int = 0,
            timestamp: int = 1_000, codec: int = 0, crc_delta: int = 0) -> bytes:
    body = struct.pack(">bB", magic, codec) + (struct.pack(">q", timestamp) if magic else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = (zlib.crc32(body) + crc_delta) & 0xFFFFFFFF
    whole = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(whole)) + whole


def test_magic_0_and_1_messages_become_one_batch():
    data = message(0, b"k0", b"v0") + message(1, None, b"v1", offset=1, timestamp=42)
    batch = to_record_batch(data, LIMIT)
    header, records = decode_batch(batch)
    assert (header.magic, header.base_offset, header.producer_id) == (2, 0, -1)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (0, b"k0", b"v0", -1), (1, None, b"v1", 42)]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY])
def test_a_compressed_wrapper_is_opened_and_its_codec_kept(codec):
    inner = b"".join(message(1, None, b"v%d" % i, offset=i, timestamp=7) for i in range(3))
    wrapper = message(1, None, compress(codec, inner), offset=2, codec=codec)
    messages, found = read_message_set(wrapper, LIMIT)
    assert ([m.value for m in messages], found) == ([b"v0", b"v1", b"v2"], codec)
    header, records = decode_batch(to_record_batch(wrapper, LIMIT))
    assert header.compression == codec and [r.value for r in records] == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize(("data", "code"), [
    (message(0, b"k", b"v", crc_delta=1), ErrorCode.CORRUPT_MESSAGE),  # CRC
    (message(0, b"k", b"v")[:-3], ErrorCode.CORRUPT_MESSAGE),  # cut short
    (b"", ErrorCode.INVALID_RECORD),  # no message
    (message(1, None, compress(GZIP, message(1, None, compress(GZIP, message(1, None, b"x")),
                                             codec=GZIP)), codec=GZIP),
     ErrorCode.CORRUPT_MESSAGE),  # compressed inside compressed
    (message(1, None, compress(GZIP, message(1, None, b"\0" * (LIMIT + 1))), codec=GZIP),
     ErrorCode.RECORD_LIST_TOO_LARGE),  # inflates past the bound
    (struct.pack(">qi", 0, 2**31 - 1) + b"\0" * 20, ErrorCode.CORRUPT_MESSAGE),  # a size lies
])
def test_what_cannot_be_read_is_refused(data, code):
    with pytest.raises(KafkaError) as refused:
        to_record_batch(data, LIMIT)
    assert refused.value.code == code


@pytest.mark.parametrize("magic", [0, 1])
def test_batches_down_convert_to_a_message_set_and_back(magic):
    batches = encode_batch([(b"k", b"a", (), 5), (None, b"b", (), 6)], base_offset=10,
                           compression=GZIP)
    marker = encode_batch([(b"\0\0\0\0", b"\0" * 6, (), 7)], base_offset=12, is_control=True)
    converted = to_message_set(batches + marker, magic)
    messages, _ = read_message_set(converted, LIMIT)
    offsets = [struct.unpack_from(">q", converted, 0)[0]]
    assert [(m.magic, m.key, m.value, m.timestamp) for m in messages] == [
        (magic, b"k", b"a", 5 if magic else -1), (magic, None, b"b", 6 if magic else -1)]
    assert offsets == [10]
    assert list(iter_batches(to_record_batch(converted, LIMIT)))  # a valid batch again
