"""Decompression never inflates past its bound: bombs are refused with RECORD_LIST_TOO_LARGE, before
or while inflating, with no buffer larger than the bound; a snappy length is checked first."""

from __future__ import annotations

import struct
import time

import cramjam
import pytest

from protocol.compression import (
    MAX_DECOMPRESSED_BYTES,
    compress,
    decompress,
    decompression_limit,
)
from protocol.compression_type import GZIP, LZ4, SNAPPY, ZSTD
from protocol.errors import ErrorCode, KafkaError

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]


def refused(codec: int, data: bytes, limit: int = MAX_DECOMPRESSED_BYTES) -> KafkaError:
    started = time.monotonic()
    with pytest.raises(KafkaError) as info:
        decompress(codec, data, limit)
    assert time.monotonic() - started < 2.0
    return info.value


def test_limit_follows_max_message_bytes_with_a_floor() -> None:
    assert MAX_DECOMPRESSED_BYTES == 16 * 1024 * 1024
    assert decompression_limit(1048588) == 16 * 1048588  # the default message.max.bytes
    assert decompression_limit(1000) == MAX_DECOMPRESSED_BYTES
    assert decompression_limit(10 * 1024 * 1024) == 160 * 1024 * 1024


@pytest.mark.parametrize("codec", CODECS)
def test_exactly_at_the_limit_inflates_one_byte_more_is_refused(codec: int) -> None:
    data = bytes(range(256)) * 1000
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data
    assert decompress(codec, packed) == data
    error = refused(codec, packed, len(data) - 1)
    assert error.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert f"past {len(data) - 1} bytes" in error.message


@pytest.mark.parametrize("codec", CODECS)
def test_bomb_is_refused_at_the_default_bound(codec: int) -> None:
    bomb = compress(codec, bytes(MAX_DECOMPRESSED_BYTES + 1))  # zeros: a few KB compressed
    assert len(bomb) < MAX_DECOMPRESSED_BYTES // 20  # snappy compresses zeros least (~21x)
    assert refused(codec, bomb).code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_large_zstd_bomb_stops_at_the_bound() -> None:
    # About 64 KB of zstd that inflates to 2 GiB: refused after at most the bound was written.
    chunk = bytes(cramjam.zstd.compress(bytes(64 * 1024 * 1024)))
    bomb = chunk * 32
    assert len(bomb) < 200_000
    assert refused(ZSTD, bomb).code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_snappy_declared_length_is_checked_before_allocating() -> None:
    four_gib = b"\xff\xff\xff\xff\x0f" + b"\x00" * 16  # raw snappy header claiming 4 GiB - 1
    assert refused(SNAPPY, four_gib).code == ErrorCode.RECORD_LIST_TOO_LARGE
    xerial = struct.pack(">8sii", b"\x82SNAPPY\x00", 1, 1)
    block = struct.pack(">i", len(four_gib)) + four_gib
    assert refused(SNAPPY, xerial + block).code == ErrorCode.RECORD_LIST_TOO_LARGE
    # blocks that each fit but together pass the bound
    small = bytes(cramjam.snappy.compress_raw(bytes(600)))
    many = xerial + (struct.pack(">i", len(small)) + small) * 3
    assert decompress(SNAPPY, many) == bytes(1800)
    assert refused(SNAPPY, many, 1500).code == ErrorCode.RECORD_LIST_TOO_LARGE


@pytest.mark.parametrize("tail", [struct.pack(">i", -8), struct.pack(">i", 1 << 30), b"\x00\x00"])
def test_xerial_block_lengths_out_of_range_are_corrupt(tail: bytes) -> None:
    xerial = struct.pack(">8sii", b"\x82SNAPPY\x00", 1, 1)
    assert refused(SNAPPY, xerial + tail + b"abc").code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_is_still_corrupt(codec: int) -> None:
    assert refused(codec, b"\x07not compressed data at all").code in (
        ErrorCode.CORRUPT_MESSAGE, ErrorCode.RECORD_LIST_TOO_LARGE)
