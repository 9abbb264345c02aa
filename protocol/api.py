"""Public codec API: request/response bodies by (api_key, api_version), header versions, API names.

Decoding returns construct Containers (keys and attributes, snake_case names); encoding takes plain
dicts in which missing keys take the schema default. Bad input raises ProtocolDecodeError only.
"""

from __future__ import annotations

import io as _io
from typing import Any

from construct import Container

from protocol.errors import ProtocolDecodeError
from protocol.file_region import FileRegion
from protocol.schema import BY_KEY, Codec, codec, format_path, within

API_NAMES: dict[int, str] = {
    key: BY_KEY.name((key, kind)).removesuffix("Request") for key, kind in sorted(BY_KEY) if kind == "request"
}
API_VERSIONS_KEY = 18
HEADER_V0 = frozenset({(7, 0)})  # ControlledShutdown v0 sends request header v0


class ProtocolEncodeError(ValueError):
    """A body that cannot be encoded (wrong type, out of range, None for a non-nullable field)."""


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"Unknown({api_key})")


def valid_versions(api_key: int) -> tuple[int, int] | None:
    """(min, max) versions of the official schema, or None for an unknown api key."""
    message = BY_KEY.get((api_key, "request"))
    return message.valid if message else None


def is_flexible(api_key: int, api_version: int) -> bool:
    message = BY_KEY.get((api_key, "request"))
    return message is not None and within(message.flexible, api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions (also above the known max), else 1 (0 for ControlledShutdown v0)."""
    if (api_key, api_version) in HEADER_V0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions always answers with header v0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def decode_request(
    api_key: int, api_version: int, body: Any, offset: int = 0, *, explain: bool = True,
    max_elements: int | None = None,
) -> Container:
    """Decode a request body (bytes or memoryview, starting at `offset`); trailing bytes are ignored.

    On bad input, `explain` parses it a second time with the interpreted parser to say where it
    failed; the broker passes False so that a peer's unreadable frame costs one parse only.
    `max_elements` bounds the array elements the body may hold (ProtocolDecodeError beyond)."""
    return _decode(api_key, api_version, "request", body, offset, explain, max_elements)


def decode_response(api_key: int, api_version: int, body: Any, offset: int = 0) -> Container:
    return _decode(api_key, api_version, "response", body, offset)


def encode_request(api_key: int, api_version: int, body: dict) -> bytes:
    return _encode(api_key, api_version, "request", body)


def encode_response(api_key: int, api_version: int, body: dict) -> bytes:
    """Encode a response body; missing keys take their defaults, tagged fields at default are omitted."""
    return _encode(api_key, api_version, "response", body)


class _RegionsIO(_io.BytesIO):
    """An encoder's stream that leaves FileRegions out, noting where each goes."""

    def __init__(self) -> None:
        super().__init__()
        self.regions: list[tuple[int, FileRegion]] = []


def encode_response_parts(api_key: int, api_version: int,
                          body: dict) -> bytes | list[bytes | FileRegion]:
    """`encode_response`, with the body's FileRegions left in their files: the encoded bytes cut
    where each region goes, the regions between them (sent with sendfile by the connection);
    plain bytes when the body has none."""
    c = _codec(api_key, api_version, "response", ProtocolEncodeError)
    out = _RegionsIO()
    try:
        c.compiled.buildfunc(body, out, None)
    except Exception:
        return _encode(api_key, api_version, "response", body)  # it says what was wrong
    data, parts, start = out.getvalue(), [], 0
    if not out.regions:
        return data
    for position, region in out.regions:
        parts += [data[start:position], region]
        start = position
    parts.append(data[start:])
    return parts


def precompile(api_keys: list[int] | None = None) -> int:
    """Build and compile every version's request and response codecs now (else on first use, ~2 ms each)."""
    count = 0
    for key in API_NAMES if api_keys is None else api_keys:
        lo, hi = valid_versions(key) or (0, -1)
        for version in range(lo, hi + 1):
            count += sum(codec(key, version, kind) is not None for kind in ("request", "response"))
    return count


def _codec(api_key: int, api_version: int, kind: str, error: type[Exception]) -> Codec:
    found = codec(api_key, api_version, kind)
    if found is None:
        raise error(f"no {kind} schema for {api_name(api_key)} (key {api_key}) v{api_version}")
    return found


def _decode(
    api_key: int, api_version: int, kind: str, body: Any, offset: int, explain: bool = True,
    max_elements: int | None = None,
) -> Container:
    c = _codec(api_key, api_version, kind, ProtocolDecodeError)
    try:
        return c.parse(body, offset, max_elements)
    except Exception as fast:
        if not explain:
            raise ProtocolDecodeError(_describe(c, kind, fast)) from fast
        # The compiled parser says only that something failed; the interpreted one says where.
        try:
            c.parse_interpreted(body, offset)
        except Exception as slow:
            raise ProtocolDecodeError(_describe(c, kind, slow)) from slow
        raise ProtocolDecodeError(_describe(c, kind, fast)) from fast


def _encode(api_key: int, api_version: int, kind: str, body: dict) -> bytes:
    c = _codec(api_key, api_version, kind, ProtocolEncodeError)
    out = _io.BytesIO()
    try:
        c.compiled.buildfunc(body, out, None)
    except Exception as fast:
        try:
            c.interpreted._build(body, _io.BytesIO(), Container(), "")
        except Exception as slow:
            raise ProtocolEncodeError(_describe(c, kind, slow)) from slow
        raise ProtocolEncodeError(_describe(c, kind, fast)) from fast
    return out.getvalue()


def _describe(c: Codec, kind: str, e: BaseException) -> str:
    where = format_path(e)
    text = getattr(e, "message", None) or str(e) or type(e).__name__
    return f"{api_name(c.message.api_key)} v{c.version} {kind}: {where + ': ' if where else ''}{text}"
