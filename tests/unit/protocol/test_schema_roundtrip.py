"""Every request and response of every API round-trips encode -> decode -> encode at every version."""

from __future__ import annotations

import io
from typing import Any

import pytest
from construct import Container

from protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    valid_versions,
)
from protocol.message_spec import Field
from protocol.schema import BY_KEY, codec, within

REQUIRED = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 23, 32, 42, 47}
CASES = [
    (key, version, kind)
    for (key, kind), m in sorted(BY_KEY.items())
    for version in range(m.valid[0], m.valid[1] + 1)
]
CODECS = {"request": (encode_request, decode_request), "response": (encode_response, decode_response)}
INT_RANGE = {"int8": 127, "int16": 32767, "int32": 2**31 - 1, "int64": 2**63 - 1, "uint16": 65535, "uint32": 2**32 - 1}


def present(f: Field, version: int, flexible: bool) -> bool:
    return (f.tag is not None and flexible and within(f.tagged, version)) or within(f.versions, version)


def scalar(f: Field, base: str, salt: int) -> Any:
    """A value of type `base` that differs from the field's default."""
    default = f.default
    if base in INT_RANGE:
        step = 7 + salt
        return default - step if isinstance(default, int) and default + step > INT_RANGE[base] else (default or 0) + step
    return {
        "bool": not default,
        "float64": 1.5 + salt,
        "string": f"{f.name}-{salt}-\u00e9",
        "bytes": bytes([1, 2, salt % 256]),
        "records": b"\x00" * 3 + bytes([salt % 256]),
        "uuid": bytes(range(salt, salt + 16)),
    }[base]


def sample(fields: tuple[Field, ...], version: int, flexible: bool, salt: int = 0) -> dict:
    body = {}
    for i, f in enumerate(fields):
        if not present(f, version, flexible):
            continue
        s = salt + i
        if f.fields:
            items = [sample(f.fields, version, flexible, s + k) for k in (1, 2)]
            body[f.name] = items if f.type.startswith("[]") else items[0]
        elif f.type.startswith("[]"):
            base = f.type[2:]
            body[f.name] = [scalar(f, base, s + 1), scalar(f, base, s + 2)]
        else:
            body[f.name] = scalar(f, f.type, s)
    return body


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def test_required_apis_are_declared() -> None:
    for key in REQUIRED:
        assert valid_versions(key) is not None, key
        assert (key, "response") in BY_KEY


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES)
def test_round_trip(api_key: int, version: int, kind: str) -> None:
    message = BY_KEY[api_key, kind]
    body = sample(message.fields, version, within(message.flexible, version))
    encode, decode = CODECS[kind]
    wire = encode(api_key, version, body)
    decoded = decode(api_key, version, wire)
    assert isinstance(decoded, Container)
    assert plain(decoded) == body
    assert encode(api_key, version, decoded) == wire
    # compiled and interpreted structures agree both ways
    c = codec(api_key, version, kind)
    assert c.parse_interpreted(wire) == decoded
    out = io.BytesIO()
    c.interpreted._build(body, out, Container(), "")
    assert out.getvalue() == wire


@pytest.mark.parametrize(("api_key", "version", "kind"), [c for c in CASES if c[0] in REQUIRED])
def test_defaults_fill_missing_keys(api_key: int, version: int, kind: str) -> None:
    """An empty dict encodes as the all-defaults body, and decodes back to every field."""
    encode, decode = CODECS[kind]
    wire = encode(api_key, version, {})
    decoded = decode(api_key, version, wire)
    assert encode(api_key, version, decoded) == wire
    message = BY_KEY[api_key, kind]
    flexible = within(message.flexible, version)
    assert set(decoded) == {f.name for f in message.fields if present(f, version, flexible)}


def test_tagged_fields_are_plain_keys_and_omitted_at_default() -> None:
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": b""}]}]}
    wire = encode_response(1, 12, body)
    decoded = decode_response(1, 12, wire)
    part = decoded.responses[0].partitions[0]
    assert part.diverging_epoch == {"epoch": -1, "end_offset": -1}  # tagged, absent: default
    assert part.current_leader.leader_id == -1
    tagged = dict(body)
    tagged["responses"][0]["partitions"][0]["current_leader"] = {"leader_id": 3, "leader_epoch": 9}
    wire2 = encode_response(1, 12, tagged)
    assert len(wire2) > len(wire)
    assert decode_response(1, 12, wire2).responses[0].partitions[0].current_leader == {"leader_id": 3, "leader_epoch": 9}


def test_unknown_tags_are_skipped() -> None:
    # ApiVersions v3 request body: two compact strings, then a tagged section with an unknown tag 7
    wire = b"\x02a\x02b" + b"\x01" + b"\x07\x03xyz"
    decoded = decode_request(18, 3, wire)
    assert decoded == {"client_software_name": "a", "client_software_version": "b"}


def test_nulls_round_trip() -> None:
    wire = encode_request(3, 12, {"topics": None})
    assert decode_request(3, 12, wire).topics is None
    body = {"topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": None}]}]}
    assert decode_request(0, 9, encode_request(0, 9, body)).topic_data[0].partition_data[0].records is None
