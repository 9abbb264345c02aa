"""Request header versions and parsing (README §4), including unknown APIs and versions."""

from __future__ import annotations

import pytest

from protocol import (
    ProtocolDecodeError,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    request_header_version,
    response_header_version,
)

# (api_key, api_version, request header version, response header version)
VERSIONS = [
    (0, 8, 1, 0), (0, 9, 2, 1), (1, 11, 1, 0), (1, 12, 2, 1), (3, 8, 1, 0), (3, 9, 2, 1),
    (18, 0, 1, 0), (18, 2, 1, 0), (18, 3, 2, 0), (18, 4, 2, 0), (18, 7, 2, 0),  # ApiVersions: always v0
    (47, 0, 1, 0),  # OffsetDelete: never flexible
    (7, 0, 0, 0),  # ControlledShutdown v0 uses request header v0
    (999, 3, 1, 0),  # unknown api
]


@pytest.mark.parametrize(("key", "ver", "req", "resp"), VERSIONS)
def test_header_versions(key: int, ver: int, req: int, resp: int) -> None:
    assert request_header_version(key, ver) == req
    assert response_header_version(key, ver) == resp


def test_header_v2_skips_tagged_fields() -> None:
    head = encode_request_header(3, 12, 99, "client")[:-1] + b"\x01\x05\x02hi"  # one unknown tag
    header, offset = decode_request_header(head + b"\x07")
    assert header.client_id == "client" and header.header_version == 2
    assert offset == len(head)


def test_unsupported_api_versions_reads_v2() -> None:
    frame = encode_request_header(18, 42, 5, "librdkafka") + b"\x0bgarbage"
    header, _ = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.header_version) == (18, 42, 5, 2)


@pytest.mark.parametrize(
    "frame",
    [b"", b"\x00\x03\x00\x01\x00\x00", b"\x00\x03\x00\x01\x00\x00\x00\x01\x00",
     b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x09ab", b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xfe",
     b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x01\xff",  # not utf-8
     b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x00",  # v2 without its tagged section
     b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x00\x01\x00\x09"],  # tag size beyond the frame
)
def test_bad_request_headers(frame: bytes) -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_request_header(frame)


def test_response_headers_round_trip() -> None:
    assert decode_response_header(encode_response_header(7, 0) + b"body", 0) == (7, 4)
    assert decode_response_header(encode_response_header(7, 1) + b"body", 1) == (7, 5)
    with pytest.raises(ProtocolDecodeError):
        decode_response_header(b"\x00\x00", 0)
