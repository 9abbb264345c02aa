"""Request and response headers (v0-v2; v2 carries tagged fields), read before the body's schema is known.

Wire grammar:
  request header v0  api_key int16, api_version int16, correlation_id int32
  request header v1  v0, client_id nullable string (int16 length, always classic)
  request header v2  v1, tagged section (uvarint count, tags; skipped)
  response header v0 correlation_id int32;  v1  v0, tagged section (empty: 0x00)
The header version follows the request's API version: flexible versions use v2/v1 (api.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.api import request_header_version, response_header_version
from protocol.errors import ProtocolDecodeError
from protocol.types import Reader, read_tagged

_FIXED = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")
_I16 = struct.Struct(">h")
_SKIP_ALL: dict = {}


@dataclass(slots=True)
class RequestHeader:
    """A request's header as decoded (v0-v2); the body's schema follows from key and version."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the header at the start of `frame`; return it and the offset where the body starts.

    Works for unknown api keys and unsupported versions too (v1 rules, or v2 where the API's
    flexible range is open-ended, e.g. ApiVersions >= 3), so the broker can still answer.
    """
    if len(frame) < 8:
        raise ProtocolDecodeError(f"request header needs 8 bytes, frame has {len(frame)}")
    api_key, api_version, correlation_id = _FIXED.unpack_from(frame, 0)
    version = request_header_version(api_key, api_version)
    if version == 0:
        return RequestHeader(api_key, api_version, correlation_id, None, 0), 8
    if len(frame) < 10:
        raise ProtocolDecodeError("request header: truncated client_id length")
    (size,) = _I16.unpack_from(frame, 8)
    client_id, pos = None, 10
    if size >= 0:
        pos += size
        if pos > len(frame):
            raise ProtocolDecodeError(f"request header: client_id length {size} exceeds the frame")
        try:
            client_id = bytes(frame[10:pos]).decode()
        except UnicodeDecodeError as e:
            raise ProtocolDecodeError(f"request header: client_id is not utf-8: {e}") from None
    elif size != -1:
        raise ProtocolDecodeError(f"request header: invalid client_id length {size}")
    if version >= 2:
        pos = _skip_tagged(frame, pos, "request")
    return RequestHeader(api_key, api_version, correlation_id, client_id, version), pos


def _skip_tagged(frame: bytes | memoryview, pos: int, which: str) -> int:
    if pos < len(frame) and frame[pos] == 0:
        return pos + 1
    io = Reader(frame, pos)  # over the frame itself: no copy of the body that follows
    try:
        read_tagged(io, {}, _SKIP_ALL, ())
    except Exception as e:
        raise ProtocolDecodeError(f"{which} header: bad tagged fields: {e}") from e
    return io.tell()


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, header_version: int | None = None
) -> bytes:
    """Encode a request header (tests and the inter-broker clients); version chosen from the API by default."""
    if header_version is None:
        header_version = request_header_version(api_key, api_version)
    out = bytearray(_FIXED.pack(api_key, api_version, correlation_id))
    if header_version >= 1:
        out += _string(client_id)
    if header_version >= 2:
        out += b"\x00"
    return bytes(out)


def _string(value: str | None) -> bytes:
    if value is None:
        return b"\xff\xff"
    data = value.encode()
    return _I16.pack(len(data)) + data


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    head = _CORRELATION.pack(correlation_id)
    return head + b"\x00" if header_version >= 1 else head


def response_header_for(api_key: int, api_version: int, correlation_id: int) -> bytes:
    return encode_response_header(correlation_id, response_header_version(api_key, api_version))


def decode_response_header(frame: bytes | memoryview, header_version: int) -> tuple[int, int]:
    """Return (correlation_id, body offset) of a response frame."""
    if len(frame) < 4:
        raise ProtocolDecodeError(f"response header needs 4 bytes, frame has {len(frame)}")
    (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
    if header_version < 1:
        return correlation_id, 4
    return correlation_id, _skip_tagged(frame, 4, "response")
