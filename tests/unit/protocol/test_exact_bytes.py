"""Tables of exact bytes, derived by hand from the spec (README §2-5), checked both ways; plus
kafka-python 3.0.12's own encoder as a second opinion."""

from __future__ import annotations

import pytest

from protocol import (
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_request_header,
    encode_response,
    encode_response_header,
)

H = bytes.fromhex

# (api_key, api_version, correlation_id, client_id, header_version, bytes)
REQUEST_HEADERS = [
    (3, 1, 7, "abc", 1, H("0003 0001 00000007 0003 616263")),
    (3, 1, 7, None, 1, H("0003 0001 00000007 ffff")),
    (3, 9, 7, "abc", 2, H("0003 0009 00000007 0003 616263 00")),  # client_id stays int16-length in v2
    (18, 0, 1, "", 1, H("0012 0000 00000001 0000")),
    (18, 4, 1, "kp", 2, H("0012 0004 00000001 0002 6b70 00")),
    (18, 99, 1, "kp", 2, H("0012 0063 00000001 0002 6b70 00")),  # above max: still v2 (README §4)
    (1000, 0, 5, "x", 1, H("03e8 0000 00000005 0001 78")),  # unknown api: v1
]


@pytest.mark.parametrize(("key", "ver", "corr", "client", "hv", "wire"), REQUEST_HEADERS)
def test_request_header(key: int, ver: int, corr: int, client: str | None, hv: int, wire: bytes) -> None:
    assert encode_request_header(key, ver, corr, client) == wire
    header, offset = decode_request_header(wire + b"BODY")
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (key, ver, corr, client)
    assert header.header_version == hv
    assert offset == len(wire)


@pytest.mark.parametrize(("version", "wire"), [(0, H("0000002a")), (1, H("0000002a 00"))])
def test_response_header(version: int, wire: bytes) -> None:
    assert encode_response_header(42, version) == wire


# (api_key, version, kind, body, bytes)
BODIES = [
    (18, 0, "request", {}, b""),
    # the fallback reply: v0 body, error 35 UNSUPPORTED_VERSION, one entry {18, 0, 4}
    (18, 0, "response", {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]},
     H("0023 00000001 0012 0000 0004")),
    (18, 3, "response",
     {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}], "throttle_time_ms": 0},
     H("0000 02 0012 0000 0004 00 00000000 00")),
    (18, 3, "request", {"client_software_name": "kp", "client_software_version": "3.0"},
     H("03 6b70 04 332e30 00")),
    (3, 1, "request", {"topics": [{"name": "foo"}]}, H("00000001 0003 666f6f")),
    (3, 1, "request", {"topics": None}, H("ffffffff")),  # null = all topics
    (0, 9, "request",
     {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
      "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}]},
     H("00 ffff 000003e8 02 0274 02 00000000 04616263 00 00 00")),
]


@pytest.mark.parametrize(("key", "ver", "kind", "body", "wire"), BODIES)
def test_body_bytes(key: int, ver: int, kind: str, body: dict, wire: bytes) -> None:
    encode, decode = (encode_request, decode_request) if kind == "request" else (encode_response, decode_response)
    assert encode(key, ver, body) == wire
    decoded = decode(key, ver, wire)
    assert {k: decoded[k] for k in body} == body  # absent tagged fields decode as their defaults


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_kafka_python_metadata_and_produce_decode_with_ours() -> None:
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.producer import ProduceRequest

    topic = MetadataRequest.MetadataRequestTopic
    for version in (1, 4, 8):
        theirs = bytes(MetadataRequest(version=version, topics=[topic(name="a"), topic(name="bb")]).encode(version=version))
        assert decode_request(3, version, theirs).topics == [{"name": "a"}, {"name": "bb"}]
        assert encode_request(3, version, decode_request(3, version, theirs)) == theirs
    theirs = bytes(MetadataRequest(version=12, topics=[topic(name="a", topic_id=None)],
                                   allow_auto_topic_creation=True).encode(version=12))
    ours = decode_request(3, 12, theirs)
    assert ours.topics[0].name == "a" and ours.allow_auto_topic_creation is True
    assert encode_request(3, 12, ours) == theirs

    data = ProduceRequest.TopicProduceData
    part = data.PartitionProduceData
    for version in (3, 9, 11):
        req = ProduceRequest(version=version, transactional_id="tx", acks=-1, timeout_ms=1500,
                             topic_data=[data(name="t", partition_data=[part(index=2, records=b"xyz")])])
        theirs = bytes(req.encode(version=version))
        ours = decode_request(0, version, theirs)
        assert ours.transactional_id == "tx" and ours.acks == -1 and ours.timeout_ms == 1500
        assert ours.topic_data == [{"name": "t", "partition_data": [{"index": 2, "records": b"xyz"}]}]
        assert encode_request(0, version, ours) == theirs


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_kafka_python_decodes_our_api_versions_response() -> None:
    from kafka.protocol.metadata import ApiVersionsResponse

    body = {"error_code": 0, "throttle_time_ms": 0,
            "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 11},
                         {"api_key": 18, "min_version": 0, "max_version": 4}]}
    for version in (0, 1, 2, 3, 4):
        theirs = ApiVersionsResponse.decode(encode_response(18, version, body), version=version)
        assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [(0, 3, 11), (18, 0, 4)]
