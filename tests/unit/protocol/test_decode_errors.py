"""Bad bodies raise ProtocolDecodeError, and nothing else, without large allocations."""

from __future__ import annotations

import contextlib
import random
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import (
    ProtocolDecodeError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

PRODUCE_V9 = encode_request(0, 9, {"acks": 1, "timeout_ms": 5, "topic_data": [
    {"name": "t", "partition_data": [{"index": 0, "records": b"abcdef"}]}]})
METADATA_V1 = encode_request(3, 1, {"topics": [{"name": "foo"}]})
FETCH_V12 = encode_response(1, 12, {"responses": [{"topic": "t", "partitions": [{"records": b"xyz"}]}]})


@pytest.mark.parametrize(("key", "ver", "wire"), [(0, 9, PRODUCE_V9), (3, 1, METADATA_V1)])
def test_every_truncation_fails_cleanly(key: int, ver: int, wire: bytes) -> None:
    for cut in range(len(wire)):
        with pytest.raises(ProtocolDecodeError):
            decode_request(key, ver, wire[:cut])


def test_truncated_response() -> None:
    for cut in range(len(FETCH_V12)):
        with pytest.raises(ProtocolDecodeError):
            decode_response(1, 12, FETCH_V12[:cut])


def test_trailing_bytes_are_ignored() -> None:
    assert decode_request(3, 1, METADATA_V1 + b"junk").topics == [{"name": "foo"}]


@pytest.mark.parametrize(
    ("key", "ver", "wire", "needle"),
    [
        (3, 1, b"\x7f\xff\xff\xff" + b"\x00" * 16, "array count 2147483647"),  # huge classic count
        (0, 9, b"\x00\xff\xff\x00\x00\x00\x01\xff\xff\xff\xff\x0f", "compact array count"),  # huge varint count
        (0, 9, b"\x00\xff\xff\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff", "varint longer"),  # runaway varint
        (0, 9, b"\x00\xff\xff\x00\x00\x00\x01\x80", "truncated unsigned varint"),
        (3, 1, b"\x00\x00\x00\x01\xff\xfe", "invalid string length -2"),  # negative length
        (3, 1, b"\x00\x00\x00\x01\xff\xff", "null in a non-nullable"),
        (3, 1, b"\xff\xff\xff\xf0", "invalid array count"),
        (0, 3, b"\xff\xff\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"
               b"\x00\x00\x00\x00\x7f\x00\x00\x00", "bytes length"),  # records longer than the body
        (3, 1, b"\x00\x00\x00\x01\x00\x02\xff\xfe", "utf-8"),
    ],
)
def test_bad_lengths(key: int, ver: int, wire: bytes, needle: str) -> None:
    with pytest.raises(ProtocolDecodeError) as info:
        decode_request(key, ver, wire)
    assert needle in str(info.value)


def test_error_message_names_the_field() -> None:
    wire = PRODUCE_V9[:-6]
    with pytest.raises(ProtocolDecodeError, match=r"Produce v9 request: topic_data\[0\]\.partition_data\[0\]"):
        decode_request(0, 9, wire)


def test_huge_count_allocates_nothing() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolDecodeError):
            decode_request(3, 1, b"\x7f\xff\xff\xff" + b"\x00" * 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_unknown_api_or_version() -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_request(1000, 0, b"")
    with pytest.raises(ProtocolDecodeError):
        decode_request(18, 99, b"")


def test_random_corruption_only_raises_decode_errors() -> None:
    rng = random.Random(7)
    for wire, key, ver in [(PRODUCE_V9, 0, 9), (METADATA_V1, 3, 1)]:
        for _ in range(500):
            data = bytearray(wire)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            with contextlib.suppress(ProtocolDecodeError):
                decode_request(key, ver, bytes(data))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.sampled_from([(0, 3), (0, 9), (1, 12), (3, 1), (3, 12), (18, 3), (11, 9)]))
def test_fuzz_bodies(data: bytes, api: tuple[int, int]) -> None:
    with contextlib.suppress(ProtocolDecodeError):
        decode_request(api[0], api[1], data)
