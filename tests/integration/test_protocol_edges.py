"""Raw protocol over TCP: version fallback, per-partition errors, and bad input that must close
only its own connection while other clients go on."""

from __future__ import annotations

import struct

from crc32c import crc32c

from protocol.api import request_header_version
from protocol.errors import ErrorCode
from protocol.framing import encode_frame
from protocol.headers import encode_request_header
from protocol.records import (
    _I16,
    _I32,
    _I64,
    _U32,
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    CREATE_TIME,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    encode_batch,
    iter_batches,
)
from tests.integration.raw_client import RawClient

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19


async def create_topic(client: RawClient, name: str, partitions: int = 1) -> None:
    response = await client.request(CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1}]})
    assert response.topics[0].error_code == 0, response


def produce_body(entries: dict[tuple[str, int], bytes], acks: int = 1) -> dict:
    topics: dict[str, list] = {}
    for (topic, partition), records in entries.items():
        topics.setdefault(topic, []).append({"index": partition, "records": records})
    return {"acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}


async def healthy(port: int) -> None:
    """A well-behaved client on its own connection is served."""
    client = await RawClient.connect(port)
    response = await client.request(API_VERSIONS, 3, {"client_software_name": "healthy",
                                                      "client_software_version": "1.0"})
    assert response.error_code == 0
    await client.close()


async def test_api_versions_lists_exactly_the_implemented_ranges(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(API_VERSIONS, 0, {})
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges == {0: (0, 12), 1: (0, 17), 2: (0, 9), 3: (0, 12), 18: (0, 4), 19: (0, 7),
                      20: (0, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 32: (0, 4), 33: (0, 2), 34: (0, 2), 35: (0, 4),
                      44: (0, 1), 61: (0, 0),
                      # transactions v2 (transaction.version 2): Produce 12, EndTxn 5,
                      # TxnOffsetCommit 5, as Kafka 4.0
                      24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (0, 1), 28: (0, 5), 65: (0, 0),
                      66: (0, 1),
                      8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5),
                      14: (0, 5), 15: (0, 5), 16: (0, 5), 37: (0, 3), 42: (0, 2), 47: (0, 0),
                      48: (0, 1), 49: (0, 1),  # DescribeClientQuotas, AlterClientQuotas
                      # inter-broker, as a ZooKeeper-mode Kafka 3.9 broker advertises them
                      4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3),
                      17: (0, 1), 36: (0, 2),  # SASL: advertised on every listener, as Kafka
                      50: (0, 0), 51: (0, 0),
                      60: (0, 1),  # DescribeCluster
                      43: (0, 2), 45: (0, 0), 46: (0, 0),  # ElectLeaders, reassignments
                      29: (0, 3), 30: (0, 3), 31: (0, 3),  # DescribeAcls, CreateAcls, DeleteAcls
                      # delegation tokens: refused as a ZK 3.9 broker does
                      38: (0, 3), 39: (0, 2), 40: (0, 2), 41: (0, 3),
                      68: (0, 1), 69: (0, 0),  # KIP-848 consumer groups, v1 as Kafka 4.0
                      76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),  # KIP-932 (fetch and ack as 4.2)
                      84: (0, 0), 85: (0, 0),  # its share state, inter-broker
                      83: (0, 0), 86: (0, 0), 90: (0, 0), 91: (0, 0), 92: (0, 0)}
    await client.close()


async def test_api_versions_above_supported_gets_v0_layout_fallback(async_broker):
    client = await RawClient.connect(async_broker.port)
    header = encode_request_header(API_VERSIONS, 9, 77, "future-client", header_version=2)
    await client.send_raw(encode_frame(header + b"\x00garbage-body"))
    frame = await client.read_frame()
    # v0 response header, v0 body: error 35, one entry {18, 0, 4}, no throttle field.
    assert frame == struct.pack(">ihi", 77, 35, 1) + struct.pack(">hhh", 18, 0, 4)
    await client.close()


async def test_api_versions_rejects_bad_software_name(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(API_VERSIONS, 3, {"client_software_name": "bad name!",
                                                      "client_software_version": "1"})
    assert response.error_code == ErrorCode.INVALID_REQUEST
    await client.close()


async def test_bad_partitions_fail_alone(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "edges", 2)
    good = encode_batch([(b"k", b"v", [], 1000)])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    magic1 = bytearray(good)
    magic1[16] = 1
    response = await client.request(PRODUCE, 9, produce_body({
        ("edges", 0): good,
        ("edges", 1): bytes(bad_crc),
        ("edges", 7): good,
        ("missing", 0): good,
    }))
    errors = {(t.name, p.index): p.error_code for t in response.responses
              for p in t.partition_responses}
    assert errors == {("edges", 0): ErrorCode.NONE, ("edges", 1): ErrorCode.CORRUPT_MESSAGE,
                      ("edges", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    response = await client.request(PRODUCE, 9, produce_body({("edges", 1): bytes(magic1)}))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    response = await client.request(PRODUCE, 9, produce_body({("edges", 0): good}, acks=5))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    # Nothing of the failed partitions was written; the good one holds exactly one batch.
    assert async_broker.replica_manager.partitions[("edges", 1)].log_end_offset == 0
    assert async_broker.replica_manager.partitions[("edges", 0)].log_end_offset == 1
    await client.close()


async def test_fetch_errors_per_partition(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "fe", 1)
    await client.request(PRODUCE, 9, produce_body({("fe", 0): encode_batch([(None, b"a", [], 1)])}))
    response = await client.request(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "topics": [{"topic": "fe", "partitions": [
            {"partition": 0, "fetch_offset": 5, "partition_max_bytes": 1 << 20},
            {"partition": 3, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    p0, p3 = response.responses[0].partitions
    assert (p0.error_code, p0.high_watermark, p0.log_start_offset) == (
        ErrorCode.OFFSET_OUT_OF_RANGE, 1, 0)
    assert p3.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    response = await client.request(FETCH, 12, {
        "max_wait_ms": 0, "min_bytes": 0, "session_id": 123, "session_epoch": 1, "topics": []})
    assert response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    await client.close()


async def test_metadata_invalid_topic_name(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(METADATA, 12, {
        "topics": [{"name": "no spaces"}, {"name": "a" * 250}, {"name": "ok.topic"}],
        "allow_auto_topic_creation": True})
    # The valid name is auto-created: LEADER_NOT_AVAILABLE until the controller elects its leader.
    assert [t.error_code for t in response.topics] == [
        ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.LEADER_NOT_AVAILABLE]
    assert await async_broker.metadata_cache.wait_for(
        lambda s: async_broker.metadata_cache.has_leaders("ok.topic"), 10_000)
    response = await client.request(METADATA, 12, {"topics": [{"name": "ok.topic"}]})
    assert response.topics[0].error_code == ErrorCode.NONE
    assert response.topics[0].partitions[0].leader_id == async_broker.broker_id
    assert response.controller_id == async_broker.broker_id
    assert response.cluster_id == async_broker.cluster_id
    await client.close()


async def test_garbage_bytes_close_only_that_connection(async_broker):
    bad = await RawClient.connect(async_broker.port)
    await bad.send_raw(struct.pack(">i", 12) + b"\xde\xad\xbe\xef" * 3)
    assert await bad.is_closed_by_peer()
    await healthy(async_broker.port)


async def test_two_gib_frame_length_is_refused_before_allocation(async_broker):
    bad = await RawClient.connect(async_broker.port)
    await bad.send_raw(struct.pack(">i", 2**31 - 1) + b"\x00" * 16)
    assert await bad.is_closed_by_peer()
    negative = await RawClient.connect(async_broker.port)
    await negative.send_raw(struct.pack(">i", -5))
    assert await negative.is_closed_by_peer()
    await healthy(async_broker.port)


async def test_truncated_frame_then_disconnect(async_broker):
    bad = await RawClient.connect(async_broker.port)
    await bad.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x0c")
    await bad.close()
    await healthy(async_broker.port)


async def test_unknown_api_key_and_unsupported_version_close_the_connection(async_broker):
    for api_key, version in ((999, 0), (PRODUCE, 12), (FETCH, 99)):
        bad = await RawClient.connect(async_broker.port)
        header_version = 1 if api_key == 999 else request_header_version(api_key, version)
        header = encode_request_header(api_key, version, 1, "x", header_version=header_version)
        await bad.send_raw(encode_frame(header + b"\x00" * 8))
        assert await bad.is_closed_by_peer()
    await healthy(async_broker.port)


async def test_unreadable_body_closes_the_connection(async_broker):
    bad = await RawClient.connect(async_broker.port)
    header = encode_request_header(METADATA, 1, 1, "x")
    await bad.send_raw(encode_frame(header + struct.pack(">i", 2**30)))  # 1G topics, no bytes
    assert await bad.is_closed_by_peer()
    await healthy(async_broker.port)


def _resealed(batch: bytes, change) -> bytes:
    """`batch` changed by `change(bytearray)` and its CRC made right again."""
    out = bytearray(batch)
    change(out)
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


async def test_batches_a_client_may_not_send_are_refused_alone(async_broker):
    """Kafka's ProduceRequest.validateRecords and LogValidator: no batch at all, a batch not at
    offset 0, a record Kafka cannot read (a null header key), a LogAppendTime claimed on a
    CreateTime topic without a timestamp; each fails its partition alone, nothing is stored."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "refused", 5)
    good = encode_batch([(b"k", b"v", [], 1000), (b"k", b"w", [], 1001)])
    at_five = bytearray(good)
    _I64.pack_into(at_five, 0, 5)  # the base offset lies outside the CRC
    # One record whose header key length is -1 (a varint 1), in place of its header key "h"
    sent = encode_batch([(b"k", b"v", [("h", b"h")], 1000)])
    record = b"\x18\x00\x00\x00\x02k\x02v\x02\x02h\x02h"
    assert sent.endswith(record)

    def null_key(b: bytearray) -> None:
        b[-len(record):] = b"\x16\x00\x00\x00\x02k\x02v\x02\x01\x02h"
        _I32.pack_into(b, BATCH_LENGTH_OFFSET, len(b) - LOG_OVERHEAD)

    null_header_key = _resealed(sent, null_key)

    def append_time_without_timestamp(b: bytearray) -> None:
        _I16.pack_into(b, ATTRIBUTES_OFFSET, TIMESTAMP_TYPE_MASK)
        _I64.pack_into(b, MAX_TIMESTAMP_OFFSET, -1)

    append_time = _resealed(good, append_time_without_timestamp)
    response = await client.request(PRODUCE, 9, produce_body({
        ("refused", 0): b"", ("refused", 1): bytes(at_five), ("refused", 2): null_header_key,
        ("refused", 3): append_time, ("refused", 4): good}))
    answers = {p.index: p for p in response.responses[0].partition_responses}
    assert {i: p.error_code for i, p in answers.items()} == {
        0: ErrorCode.INVALID_RECORD, 1: ErrorCode.INVALID_RECORD, 2: ErrorCode.INVALID_RECORD,
        3: ErrorCode.INVALID_TIMESTAMP, 4: ErrorCode.NONE}
    assert "at least one record batch" in answers[0].error_message
    assert "should be 0, but it is 5" in answers[1].error_message
    # The log's refusals carry its log start offset, as Kafka's (its request checks do not)
    assert (answers[0].log_start_offset, answers[1].log_start_offset) == (-1, 0)
    assert "Invalid negative header key size -1" in answers[2].error_message
    assert [e.batch_index for e in answers[3].record_errors] == [0, 1]
    assert "LogAppendTime" in answers[3].record_errors[0].batch_index_error_message
    partitions = async_broker.replica_manager.partitions
    assert [partitions[("refused", i)].log_end_offset for i in range(5)] == [0, 0, 0, 0, 2]
    await client.close()


async def test_a_create_time_batch_is_stored_with_its_records_max_timestamp(async_broker):
    """Kafka's LogValidator sets a CreateTime batch's maxTimestamp from its records (and clears a
    LogAppendTime the producer claimed): the time index and ListOffsets see what the records say."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "stamped", 2)
    sent = encode_batch([(b"k", b"v", [], 5_000), (b"k", b"w", [], 5_010)])
    lying = _resealed(sent, lambda b: _I64.pack_into(b, MAX_TIMESTAMP_OFFSET, 0))

    def claims_append_time(b: bytearray) -> None:
        _I16.pack_into(b, ATTRIBUTES_OFFSET, TIMESTAMP_TYPE_MASK)
        _I64.pack_into(b, MAX_TIMESTAMP_OFFSET, 9_000)

    claimed = _resealed(sent, claims_append_time)
    response = await client.request(PRODUCE, 9, produce_body({("stamped", 0): lying,
                                                              ("stamped", 1): claimed}))
    assert {p.index: p.error_code for p in response.responses[0].partition_responses} == {
        0: ErrorCode.NONE, 1: ErrorCode.NONE}
    for index, expected in ((0, 5_010), (1, 9_000)):  # a claimed LogAppendTime is every record's
        log = async_broker.replica_manager.partitions[("stamped", index)].log
        [(_, stored)] = list(iter_batches(log.read(0, 1 << 20).records))
        assert (stored.timestamp_type, stored.max_timestamp) == (CREATE_TIME, expected)
    response = await client.request(LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "stamped", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -3}]}]})
    answer = response.topics[0].partitions[0]
    assert (answer.error_code, answer.offset, answer.timestamp) == (ErrorCode.NONE, 1, 5_010)
    await client.close()


async def test_a_batch_cut_short_after_a_whole_one_is_left_out(async_broker):
    """Kafka's Produce reads the whole batches and trims what follows (trimInvalidBytes): the
    batch is appended, the cut bytes are not; a compressed one takes the worker thread's path."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "trimmed", 2)
    plain = encode_batch([(b"k", b"v", [], 1000)])
    zipped = encode_batch([(b"k", b"z" * 100, [], 1000)], compression=1)
    response = await client.request(PRODUCE, 9, produce_body({
        ("trimmed", 0): plain + plain[:30], ("trimmed", 1): zipped + b"\0" * 5}))
    assert {p.index: p.error_code for p in response.responses[0].partition_responses} == {
        0: ErrorCode.NONE, 1: ErrorCode.NONE}
    for index, sent in ((0, plain), (1, zipped)):
        log = async_broker.replica_manager.partitions[("trimmed", index)].log
        assert (log.log_end_offset, log.size_in_bytes) == (1, len(sent))
    await client.close()
