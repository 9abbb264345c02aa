"""FaultInjector rules and matching; error responses that encode at every version of each API."""

from __future__ import annotations

import pytest

from broker.control.faults import (
    ERROR_RESPONSES,
    FaultAction,
    FaultInjector,
    error_response,
    parse_partition,
    resolve_api,
    resolve_error,
)
from protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    valid_versions,
)
from protocol.errors import ErrorCode

NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
TOPIC_ID = bytes(range(16))


def real(api_key: int, version: int, body: dict):
    """A request as the connection sees it: encoded to bytes, then decoded to a Container."""
    return decode_request(api_key, version, encode_request(api_key, version, body))


def produce(*pairs: tuple[str, int], version: int = 9, acks: int = -1):
    topics: dict[str, list[int]] = {}
    for topic, index in pairs:
        topics.setdefault(topic, []).append(index)
    return real(0, version, {"acks": acks, "timeout_ms": 1000, "topic_data": [
        {"name": t, "partition_data": [{"index": i, "records": b""} for i in ps]}
        for t, ps in topics.items()]})


def fetch(*pairs: tuple[str, int], version: int = 12):
    return real(1, version, {"max_wait_ms": 500, "min_bytes": 1, "topics": [
        {"topic": t, "topic_id": TOPIC_ID, "partitions": [{"partition": p, "fetch_offset": 0,
                                                           "partition_max_bytes": 1024}]}
        for t, p in pairs]})


def list_offsets(*pairs: tuple[str, int], version: int = 7):
    return real(2, version, {"replica_id": -1, "topics": [
        {"name": t, "partitions": [{"partition_index": p, "timestamp": -1}]} for t, p in pairs]})


def offset_for_leader_epoch(*pairs: tuple[str, int], version: int = 4):
    return real(23, version, {"topics": [
        {"topic": t, "partitions": [{"partition": p, "leader_epoch": 0}]} for t, p in pairs]})


# --- names and specs -----------------------------------------------------------------------------

@pytest.mark.parametrize("api", ["Produce", "produce", "PRODUCE", "0", 0, " 0 "])
def test_resolve_api_produce(api):
    assert resolve_api(api) == 0


@pytest.mark.parametrize("api, key", [("ApiVersions", 18), ("api_versions", 18),
                                      ("OffsetForLeaderEpoch", 23), ("metadata", 3)])
def test_resolve_api_names(api, key):
    assert resolve_api(api) == key


@pytest.mark.parametrize("api", ["Produc", "9999", 9999, "", None, True])
def test_resolve_api_unknown(api):
    with pytest.raises(ValueError, match="unknown API"):
        resolve_api(api)


@pytest.mark.parametrize("error, code", [(6, 6), ("6", 6), ("NOT_LEADER_OR_FOLLOWER", 6),
                                         ("not_leader_or_follower", 6), (-1, -1), ("-1", -1)])
def test_resolve_error(error, code):
    assert resolve_error(error) == code


@pytest.mark.parametrize("error, message", [(0, "not an error"), ("NONE", "not an error"),
                                            (9999, "unknown error code"), ("NOPE", "unknown error"),
                                            (True, "unknown error"), (1.5, "unknown error")])
def test_resolve_error_rejects(error, message):
    with pytest.raises(ValueError, match=message):
        resolve_error(error)


@pytest.mark.parametrize("text, pair", [("t:0", ("t", 0)), ("a.b-c:12", ("a.b-c", 12)),
                                        (("t", 3), ("t", 3)), (["t", 3], ("t", 3))])
def test_parse_partition(text, pair):
    assert parse_partition(text) == pair


@pytest.mark.parametrize("bad", ["t", "t:", ":0", "t:-1", "t:x", ("t", -1), ("", 0), ("t",), 5])
def test_parse_partition_rejects(bad):
    with pytest.raises(ValueError, match="partition must"):
        parse_partition(bad)


def test_add_each_action():
    faults = FaultInjector()
    e = faults.add(1, "Produce", error="NOT_LEADER_OR_FOLLOWER", count=2)
    d = faults.add(1, "Fetch", drop_response=True)
    c = faults.add(2, "Metadata", disconnect=True)
    w = faults.add(2, 2, delay_ms=0, partition="t:1")
    assert (e.action, e.error_code, e.remaining) == (FaultAction.ERROR, NOT_LEADER, 2)
    assert (d.action, c.action, w.action, w.delay_ms) == (
        FaultAction.DROP_RESPONSE, FaultAction.DISCONNECT, FaultAction.DELAY, 0)
    assert w.partition == ("t", 1) and w.api == "ListOffsets"
    assert [f.id for f in faults.list()] == [1, 2, 3, 4]
    assert e.to_dict() == {
        "id": 1, "broker": 1, "api": "Produce", "api_key": 0, "partition": None, "action": "error",
        "error": 6, "error_name": "NOT_LEADER_OR_FOLLOWER", "delay_ms": None, "remaining": 2,
        "hits": 0,
    }
    assert w.to_dict()["partition"] == "t:1"


@pytest.mark.parametrize("kwargs, message", [
    ({}, "exactly one .*got none"),
    ({"error": 6, "disconnect": True}, "exactly one .*got error, disconnect"),
    ({"drop_response": True, "delay_ms": 5}, "exactly one"),
    ({"delay_ms": -1}, "delay_ms must be"),
    ({"delay_ms": "5"}, "delay_ms must be"),
    ({"disconnect": True, "count": 0}, "count must be"),
    ({"disconnect": True, "count": 1.5}, "count must be"),
    ({"error": 12345}, "unknown error code"),
    ({"disconnect": True, "partition": "t"}, "partition must"),
])
def test_add_rejects_bad_specs(kwargs, message):
    faults = FaultInjector()
    with pytest.raises(ValueError, match=message):
        faults.add(1, "Produce", **kwargs)
    assert faults.list() == []


def test_add_rejects_partition_for_api_without_partitions():
    with pytest.raises(ValueError, match="Metadata requests do not address partitions"):
        FaultInjector().add(1, "Metadata", partition="t:0", disconnect=True)


def test_add_rejects_error_for_api_without_error_response():
    with pytest.raises(ValueError, match="no error response is known for JoinGroup"):
        FaultInjector().add(1, "JoinGroup", error=6)
    assert FaultInjector().add(1, "JoinGroup", disconnect=True).api_key == 11


def test_add_rejects_bad_broker_and_api():
    with pytest.raises(ValueError, match="broker must be an integer"):
        FaultInjector().add("1", "Produce", disconnect=True)
    with pytest.raises(ValueError, match="unknown API 'Nope'"):
        FaultInjector().add(1, "Nope", disconnect=True)


# --- matching ------------------------------------------------------------------------------------

def test_match_by_broker_and_api():
    faults = FaultInjector()
    fault = faults.add(1, "Produce", disconnect=True)
    assert faults.match(2, 0, produce(("t", 0))) is None
    assert faults.match(1, 1, fetch(("t", 0))) is None
    assert faults.match(1, 0, produce(("t", 0))) is fault
    assert faults.match(1, 0, produce(("t", 0))) is fault  # no count: until cleared
    assert fault.hits == 2 and fault.remaining is None


def test_count_is_consumed_and_exhausted_faults_leave():
    faults = FaultInjector()
    fault = faults.add(1, "Produce", error=6, count=2)
    assert faults.match(1, 0, produce(("t", 0))) is fault
    assert fault.remaining == 1
    assert faults.match(1, 0, produce(("t", 0))) is fault
    assert faults.list() == []
    assert faults.match(1, 0, produce(("t", 0))) is None
    assert fault.hits == 2


def test_oldest_matching_fault_wins():
    faults = FaultInjector()
    first = faults.add(1, "Produce", delay_ms=10, count=1)
    second = faults.add(1, "Produce", disconnect=True)
    assert faults.match(1, 0, produce(("t", 0))) is first
    assert faults.match(1, 0, produce(("t", 0))) is second


@pytest.mark.parametrize("api, build", [
    ("Produce", produce), ("Fetch", fetch), ("ListOffsets", list_offsets),
    ("OffsetForLeaderEpoch", offset_for_leader_epoch),
])
def test_partition_fault_matches_only_requests_touching_it(api, build):
    faults = FaultInjector()
    fault = faults.add(1, api, partition="t:1", error=6, count=1)
    key = fault.api_key
    assert faults.match(1, key, build(("t", 0))) is None
    assert faults.match(1, key, build(("u", 1))) is None
    assert fault.hits == 0 and fault.remaining == 1  # a miss consumes nothing
    assert faults.match(1, key, build(("t", 0), ("t", 1))) is fault
    assert faults.list() == []


def test_partition_fault_does_not_match_fetch_by_topic_id():
    faults = FaultInjector()
    faults.add(1, "Fetch", partition="t:0", disconnect=True)
    assert faults.match(1, 1, fetch(("t", 0), version=13)) is None


def test_clear():
    faults = FaultInjector()
    a = faults.add(1, "Produce", disconnect=True)
    faults.add(1, "Fetch", disconnect=True)
    faults.add(2, "Fetch", disconnect=True)
    assert faults.clear(fault_id=999) == 0
    assert faults.clear(fault_id=a.id) == 1
    assert faults.clear(broker_id=1) == 1
    assert [f.broker_id for f in faults.list()] == [2]
    assert faults.clear() == 1 and faults.list() == []
    assert faults.add(1, "Produce", disconnect=True).id == 4  # ids are never reused


# --- error responses -----------------------------------------------------------------------------

def roundtrip(api_key: int, version: int, request) -> dict:
    body = error_response(api_key, version, request, NOT_LEADER)
    return decode_response(api_key, version, encode_response(api_key, version, body))


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_error_response(version):
    resp = roundtrip(0, version, produce(("t", 0), ("t", 1), ("u", 2), version=version))
    got = [(t.name, p.index, p.error_code, p.base_offset)
           for t in resp.responses for p in t.partition_responses]
    assert got == [("t", 0, 6, -1), ("t", 1, 6, -1), ("u", 2, 6, -1)]


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_error_response(version):
    resp = roundtrip(1, version, fetch(("t", 0), ("u", 3), version=version))
    parts = [(p.partition_index, p.error_code, p.high_watermark, p.records)
             for t in resp.responses for p in t.partitions]
    assert parts == [(0, 6, -1, b""), (3, 6, -1, b"")]
    assert [t.get("topic") or t.get("topic_id") for t in resp.responses] == (
        ["t", "u"] if version <= 12 else [TOPIC_ID, TOPIC_ID])
    if version >= 7:
        assert resp.error_code == 0


@pytest.mark.parametrize("version", range(1, 10))
def test_list_offsets_error_response(version):
    resp = roundtrip(2, version, list_offsets(("t", 0), ("t", 1), version=version))
    assert [(t.name, p.partition_index, p.error_code, p.offset)
            for t in resp.topics for p in t.partitions] == [("t", 0, 6, -1), ("t", 1, 6, -1)]


@pytest.mark.parametrize("version", range(0, 13))
def test_metadata_error_response(version):
    topics = [{"name": "t", "topic_id": TOPIC_ID}, {"name": "u"}]
    resp = roundtrip(3, version, real(3, version, {"topics": topics}))
    assert [(t.name, t.error_code, list(t.partitions)) for t in resp.topics] == [
        ("t", 6, []), ("u", 6, [])]
    assert list(resp.brokers) == []  # the caller fills in brokers, cluster id and controller


@pytest.mark.parametrize("version", [0, 1, 12])
def test_metadata_error_response_for_all_topics_has_no_topics(version):
    request = real(3, version, {"topics": [] if version == 0 else None})
    assert error_response(3, version, request, NOT_LEADER)["topics"] == []


@pytest.mark.parametrize("version", range(0, 8))
def test_create_topics_error_response(version):
    request = real(19, version, {"topics": [{"name": "t", "num_partitions": 1,
                                             "replication_factor": 1}]})
    resp = roundtrip(19, version, request)
    assert [(t.name, t.error_code) for t in resp.topics] == [("t", 6)]


@pytest.mark.parametrize("version", range(0, 7))
def test_delete_topics_error_response(version):
    body = ({"topics": [{"name": "t"}, {"name": "u"}]} if version >= 6
            else {"topic_names": ["t", "u"]})
    resp = roundtrip(20, version, real(20, version, {**body, "timeout_ms": 1000}))
    assert [(t.name, t.error_code) for t in resp.responses] == [("t", 6), ("u", 6)]


@pytest.mark.parametrize("version", range(0, 6))
def test_init_producer_id_error_response(version):
    resp = roundtrip(22, version, real(22, version, {"transactional_id": None,
                                                     "transaction_timeout_ms": 1000}))
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (6, -1, -1)


@pytest.mark.parametrize("version", range(0, 5))
def test_describe_configs_error_response(version):
    request = real(32, version, {"resources": [{"resource_type": 2, "resource_name": "t",
                                                "configuration_keys": None}]})
    resp = roundtrip(32, version, request)
    assert [(r.resource_type, r.resource_name, r.error_code) for r in resp.results] == [(2, "t", 6)]


@pytest.mark.parametrize("version", range(0, 5))
def test_offset_for_leader_epoch_error_response(version):
    resp = roundtrip(23, version, offset_for_leader_epoch(("t", 0), ("t", 2), version=version))
    assert [(t.topic, p.partition, p.error_code, p.end_offset)
            for t in resp.topics for p in t.partitions] == [("t", 0, 6, -1), ("t", 2, 6, -1)]


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_error_response(version):
    request = real(18, version, {"client_software_name": "x", "client_software_version": "1"})
    resp = roundtrip(18, version, request)
    assert (resp.error_code, list(resp.api_keys)) == (6, [])
    unsupported = error_response(18, version, request, ErrorCode.UNSUPPORTED_VERSION)
    assert [k["api_key"] for k in unsupported["api_keys"]] == [18]


def test_every_error_response_api_is_a_known_api():
    assert all(valid_versions(key) for key in ERROR_RESPONSES)


def test_error_response_for_unknown_api():
    with pytest.raises(ValueError, match="no error response"):
        error_response(11, 0, {}, NOT_LEADER)
