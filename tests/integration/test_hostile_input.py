"""Hostile input sent to a real listener: the bad part gets Kafka's error code, nothing of it is
stored, and a fresh connection is still served within a second (the event loop is not stuck)."""

from __future__ import annotations

import asyncio
import os
import struct
import time

from crc32c import crc32c
from structlog.testing import capture_logs

from protocol.api import encode_request
from protocol.errors import ErrorCode
from protocol.framing import encode_frame
from protocol.headers import encode_request_header
from protocol.records import encode_batch
from tests.harness import led_here
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import produce_body
from tests.unit.protocol.test_records_hostile import ATTRS, batch_with_records_blob, record

PRODUCE, LIST_OFFSETS, METADATA, CREATE_TOPICS = 0, 2, 3, 19


async def served_promptly(port: int) -> None:
    """A Metadata round trip on a new connection completes within one second. The broker shares
    this event loop, so the wall clock is checked too: wait_for alone cannot see a loop that was
    blocked for a while and then let both the answer and the timeout through."""

    async def metadata() -> None:
        client = await RawClient.connect(port)
        try:
            response = await client.request(METADATA, 12, {
                "topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            assert [b.node_id for b in response.brokers] == [0]
        finally:
            await client.close()

    started = time.monotonic()
    await asyncio.wait_for(metadata(), 1.0)
    assert time.monotonic() - started < 1.0


async def create_topic(client: RawClient, name: str, partitions: int = 1,
                       configs: dict[str, str] | None = None) -> None:
    response = await client.request(CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1,
         "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}]})
    assert response.topics[0].error_code == ErrorCode.NONE, response


def partition_errors(response) -> dict[tuple[str, int], int]:
    return {(t.name, p.index): p.error_code for t in response.responses
            for p in t.partition_responses}


# A header key length of -4 walked the decoder backwards over 2^31-1 headers: an endless loop.
BACKWARDS = batch_with_records_blob(record(ATTRS, 0, 0, 1, b"k", -1, 2**31 - 1, -4, b"", -1), 1)


async def test_malformed_record_on_compacted_topic_is_invalid_record(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "compacted", 2, {"cleanup.policy": "compact"})
    good = encode_batch([(b"k", b"v", [], 1000)])
    response = await asyncio.wait_for(client.request(PRODUCE, 9, produce_body({
        ("compacted", 0): BACKWARDS, ("compacted", 1): good})), 5.0)
    assert partition_errors(response) == {("compacted", 0): ErrorCode.INVALID_RECORD,
                                          ("compacted", 1): ErrorCode.NONE}
    partitions = async_broker.replica_manager.partitions
    assert partitions[("compacted", 0)].log_end_offset == 0  # nothing appended
    assert partitions[("compacted", 1)].log_end_offset == 1
    await served_promptly(async_broker.port)
    await client.close()


async def test_list_offsets_by_timestamp_over_a_malformed_stored_record(async_broker):
    # A producer's malformed record is refused on any topic (every record's structure is walked,
    # as Kafka's LogValidator reads it); a follower appends its leader's batches as they are, and
    # the timestamp lookup decodes them.
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "plain", 2)
    good = encode_batch([(b"k", b"v", [], 1000)])
    response = await client.request(PRODUCE, 9, produce_body({
        ("plain", 0): BACKWARDS, ("plain", 1): good}))
    assert partition_errors(response) == {("plain", 0): ErrorCode.INVALID_RECORD,
                                          ("plain", 1): ErrorCode.NONE}
    async_broker.replica_manager.partitions[("plain", 0)].log.append_as_follower(BACKWARDS)
    response = await asyncio.wait_for(client.request(LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "plain", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": 500},
            {"partition_index": 1, "current_leader_epoch": -1, "timestamp": 500}]}]}), 5.0)
    p0, p1 = response.topics[0].partitions
    assert p0.error_code == ErrorCode.INVALID_RECORD
    assert (p1.error_code, p1.offset, p1.timestamp) == (ErrorCode.NONE, 0, 1000)
    await served_promptly(async_broker.port)
    await client.close()


async def test_topic_name_ending_in_newline_is_invalid(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(CREATE_TOPICS, 7, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "configs": []}
        for name in ("bad\n", "ok-name")]})
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("bad\n", ErrorCode.INVALID_TOPIC_EXCEPTION), ("ok-name", ErrorCode.NONE)]
    assert async_broker.metadata_cache.topic("bad\n") is None
    await served_promptly(async_broker.port)
    await client.close()


# Found by the protocol fuzzer (tests/fuzz): names no topic can have reached the metadata store
# as paths ("/brokers/topics/" raised ValueError out of the request); a forged LeaderAndIsr with
# one such name was refused as a whole after applying the partitions before it, and a negative
# leader epoch raised out of the leader epoch cache.
LEADER_AND_ISR, UPDATE_METADATA, CONTROLLED_SHUTDOWN, DELETE_TOPICS = 4, 6, 7, 20
CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 37, 44


async def test_illegal_topic_names_in_admin_requests_get_error_codes(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(CREATE_PARTITIONS, 3, {"topics": [
        {"name": name, "count": 2, "assignments": None} for name in ("", "/", "a/b")],
        "timeout_ms": 100, "validate_only": False})
    assert [(r.name, r.error_code) for r in response.results] == [
        (name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for name in ("", "/", "a/b")]
    response = await client.request(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": name, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}
        for name in ("", "a/b")], "validate_only": False})
    assert [(r.resource_name, r.error_code) for r in response.responses] == [
        (name, ErrorCode.INVALID_TOPIC_EXCEPTION) for name in ("", "a/b")]
    await served_promptly(async_broker.port)
    await client.close()


async def test_metadata_v10_with_a_null_topic_name_closes_the_connection(async_broker):
    client = await RawClient.connect(async_broker.port)
    with capture_logs() as logs:
        await client.send(METADATA, 10, {"topics": [{"name": None, "topic_id": b"\x01" * 16}],
                                         "allow_auto_topic_creation": False})
        assert await asyncio.wait_for(client.is_closed_by_peer(), 1.0)
    # Refused as a request this version cannot express, not a response that failed to encode.
    assert [e["reason"] for e in logs if e["event"] == "closing connection"] == [
        "Metadata v10: topic name can not be null"]
    await served_promptly(async_broker.port)
    await client.close()


async def test_forged_leader_and_isr_refuses_bad_partitions_one_by_one(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "kept")
    epoch = async_broker.replica_manager.controller_epoch

    def state(topic: str, partition: int, leader_epoch: int) -> dict:
        return {"topic_name": topic, "partition_states": [
            {"partition_index": partition, "controller_epoch": epoch, "leader": 0,
             "leader_epoch": leader_epoch, "isr": [0], "partition_epoch": 0, "replicas": [0]}]}

    escape = "../" * 8 + "fuzz-escape"
    response = await client.request(LEADER_AND_ISR, 4, {
        "controller_id": 0, "controller_epoch": epoch, "broker_epoch": -1, "live_leaders": [],
        "topic_states": [state(escape, 0, 1), state("", 0, 1), state("kept", -3, 1),
                         state("kept", 0, -1)]})
    assert response.error_code == ErrorCode.NONE
    assert [(e.topic_name, e.partition_index, e.error_code) for e in response.partition_errors] == [
        (escape, 0, ErrorCode.INVALID_TOPIC_EXCEPTION), ("", 0, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("kept", -3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("kept", 0, ErrorCode.STALE_CONTROLLER_EPOCH)]
    assert not (async_broker.config.data_dir / f"{escape}-0").resolve().exists()
    assert async_broker.replica_manager.partitions[("kept", 0)].leader_epoch == 0
    await served_promptly(async_broker.port)
    await client.close()


async def test_forged_controlled_shutdown_is_answered_broker_not_available(async_broker):
    """Kafka's answer for a broker id that is not live; the controller logs no failure for it (an
    answer, not a fault) and keeps serving its queue."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "kept")
    with capture_logs() as logs:
        for broker_id in (7, -1, 2**31 - 1):
            response = await client.request(CONTROLLED_SHUTDOWN, 3,
                                            {"broker_id": broker_id, "broker_epoch": -1})
            assert (response.error_code, response.remaining_partitions) == (
                ErrorCode.BROKER_NOT_AVAILABLE, [])
    assert not [e for e in logs if e["log_level"] in ("error", "exception")], logs
    await create_topic(client, "after")  # the controller still works
    assert async_broker.metadata_cache.has_leaders("after")
    await served_promptly(async_broker.port)
    await client.close()


async def test_a_topic_config_left_by_a_racing_creator_does_not_fail_the_creation(async_broker):
    """Two brokers auto-creating one topic at once: the loser finds the winner's config node. It
    sets it (Kafka's setOrCreateEntityConfigs) instead of failing the request with NodeExists."""
    from broker.metadata import zk_paths as paths

    await async_broker.store.create_json(paths.topic_config("raced"), {"version": 1, "config": {}})
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "raced", configs={"retention.ms": "1000"})
    data, _ = await async_broker.store.get_json(paths.topic_config("raced"))
    assert data["config"] == {"retention.ms": "1000"}
    await served_promptly(async_broker.port)
    await client.close()


async def test_delete_of_a_forged_topic_name_is_unknown_topic(async_broker):
    """A forged UpdateMetadata (no authorizer: Kafka accepts it too) put "" in the metadata
    cache; deleting it reached the store as the path '/brokers/topics/'."""
    client = await RawClient.connect(async_broker.port)
    epoch = async_broker.replica_manager.controller_epoch + 1
    host, port = "127.0.0.1", async_broker.port
    response = await client.request(UPDATE_METADATA, 7, {
        "controller_id": 0, "controller_epoch": epoch, "broker_epoch": -1,
        "topic_states": [{"topic_name": "", "topic_id": b"\x01" * 16, "partition_states": [
            {"partition_index": 0, "controller_epoch": epoch, "leader": 0, "leader_epoch": 1,
             "isr": [0], "zk_version": 0, "replicas": [0], "offline_replicas": []}]}],
        "live_brokers": [{"id": 0, "endpoints": [{"port": port, "host": host,
                                                  "listener": "PLAINTEXT",
                                                  "security_protocol": 0}], "rack": None}]})
    assert response.error_code == ErrorCode.NONE
    assert async_broker.metadata_cache.topic("") is not None
    response = await client.request(DELETE_TOPICS, 5, {"topic_names": [""], "timeout_ms": 100})
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    await served_promptly(async_broker.port)
    await client.close()


async def test_broker_starts_over_a_checkpoint_row_it_cannot_parse(tmp_path):
    """The rows a topic named "bad\\n" once left in the checkpoint files are skipped with a
    warning at start-up; the other rows still count."""
    from broker.server.cluster import Cluster
    from tests.harness import cluster_config

    config = cluster_config(tmp_path / "data")
    cluster = Cluster(config, 1)
    await cluster.start()
    broker = cluster.brokers[0]
    await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
    client = await RawClient.connect(broker.port)
    await create_topic(client, "kept")
    response = await client.request(PRODUCE, 9, produce_body({
        ("kept", 0): encode_batch([(b"k", b"v%d" % i, [], 1000) for i in range(3)])}))
    assert set(partition_errors(response).values()) == {ErrorCode.NONE}
    await client.close()
    await cluster.stop()
    broker_dir = tmp_path / "data" / "broker-0"
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint"):
        path = broker_dir / name
        lines = path.read_text().splitlines()
        assert "kept 0 3" in lines or name == "log-start-offset-checkpoint"
        path.write_text("\n".join([lines[0], str(int(lines[1]) + 1), "bad", " 0 5", *lines[2:]])
                        + "\n")
    cluster = Cluster(config, 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
        assert any("'bad'" in p for p in broker.log_manager.load_problems)
        await led_here(broker, "kept")
        await served_promptly(broker.port)
        assert broker.replica_manager.partitions[("kept", 0)].high_watermark == 3
    finally:
        await cluster.stop()


CREATE_PARTITIONS = 37
INT_MAX = 2**31 - 1


async def create_topics(client: RawClient, topics: list[dict], validate_only: bool = False):
    response = await asyncio.wait_for(client.request(CREATE_TOPICS, 7, {
        "topics": [{"num_partitions": -1, "replication_factor": -1, "assignments": [],
                    "configs": [], **t} for t in topics],
        "timeout_ms": 5000, "validate_only": validate_only}), 5.0)
    return {t.name: (t.error_code, t.error_message) for t in response.topics}


def manual(*lists: tuple[int, list[int]]) -> list[dict]:
    return [{"partition_index": p, "broker_ids": b} for p, b in lists]


async def test_create_topics_refuses_bad_manual_assignments_topic_by_topic(async_broker):
    client = await RawClient.connect(async_broker.port)
    bad = {
        "negative-partition": manual((-5, [0])),
        "gap": manual((0, [0]), (2, [0])),
        "empty-list": manual((0, [0]), (1, [])),
        "twice": manual((0, [0, 0])),
        "lengths": manual((0, [0]), (1, [0, 0])),
        "unknown-broker": manual((0, [7])),
    }
    results = await create_topics(client, [
        *({"name": n, "assignments": a} for n, a in bad.items()),
        {"name": "fine", "assignments": manual((1, [0]), (0, [0]))}])
    assert {n: code for n, (code, _) in results.items()} == {
        **dict.fromkeys(bad, ErrorCode.INVALID_REPLICA_ASSIGNMENT), "fine": ErrorCode.NONE}
    assert results["gap"][1] == "partitions should be a consecutive 0-based integer sequence"
    assert results["negative-partition"][1] == results["gap"][1]
    assert results["lengths"][1] == "All partitions should have the same number of replicas"
    assert results["twice"][1].startswith("Duplicate replica assignment found")
    for name in bad:
        assert async_broker.metadata_cache.topic(name) is None
    assert async_broker.metadata_cache.topic("fine").num_partitions == 2
    await served_promptly(async_broker.port)
    await client.close()


async def test_create_topics_with_int_max_partitions_is_refused_promptly(async_broker):
    client = await RawClient.connect(async_broker.port)
    for validate_only in (True, False):
        results = await create_topics(client, [
            {"name": "huge", "num_partitions": INT_MAX, "replication_factor": 1},
            {"name": "huge-manual", "assignments": manual(*((p, [0]) for p in range(10_001)))},
            {"name": "small", "num_partitions": 2, "replication_factor": 1},
        ], validate_only=validate_only)
        assert results["huge"] == results["huge-manual"] == (
            ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
        assert results["small"][0] == ErrorCode.NONE
        await served_promptly(async_broker.port)
    assert async_broker.metadata_cache.topic("huge") is None
    # The cap is per request: 6,000 + 6,000 partitions is over it, the second topic is refused.
    results = await create_topics(client, [
        {"name": "six-a", "num_partitions": 6000, "replication_factor": 1},
        {"name": "six-b", "num_partitions": 6000, "replication_factor": 1},
        {"name": "four", "num_partitions": 4000, "replication_factor": 1},
    ], validate_only=True)
    assert {n: code for n, (code, _) in results.items()} == {
        "six-a": ErrorCode.NONE, "six-b": ErrorCode.POLICY_VIOLATION, "four": ErrorCode.NONE}
    await client.close()


async def test_create_partitions_refuses_bad_assignments_and_huge_counts(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "grow")

    async def grow(count: int, assignments: list[list[int]] | None, validate_only: bool = False):
        response = await asyncio.wait_for(client.request(CREATE_PARTITIONS, 3, {
            "topics": [{"name": "grow", "count": count, "assignments": None if assignments is None
                        else [{"broker_ids": b} for b in assignments]}],
            "timeout_ms": 5000, "validate_only": validate_only}), 5.0)
        return response.results[0].error_code, response.results[0].error_message

    assert await grow(2, [[]]) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   "Cannot have replication factor of 0 for partition id 1.")
    assert await grow(2, [[0, 0]]) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Duplicate brokers not allowed in replica assignment: 0, 0 for partition id 1.")
    assert await grow(2, [[0], [0]]) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Increasing the number of partitions by 1 but 2 assignments provided.")
    assert await grow(2, [[7]]) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    "Unknown broker(s) in replica assignment: 7.")
    for validate_only in (True, False):
        assert await grow(INT_MAX, None, validate_only) == (
            ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
        await served_promptly(async_broker.port)
    assert async_broker.metadata_cache.topic("grow").num_partitions == 1
    assert await grow(3, [[0], [0]]) == (ErrorCode.NONE, None)
    assert async_broker.metadata_cache.topic("grow").num_partitions == 3
    await client.close()


def zstd_bomb() -> bytes:
    """A CRC-valid zstd batch of a few KB whose records inflate past the bound (16 x message.max.bytes)."""
    from protocol.records import MAX_DECOMPRESSED_BYTES, ZSTD

    return encode_batch([(b"k", bytes(MAX_DECOMPRESSED_BYTES * 5 // 4), [], 1000)], compression=ZSTD)


def snappy_claiming_4_gib() -> bytes:
    """A CRC-valid snappy batch whose raw snappy header declares 4 GiB - 1 of records."""
    from protocol.records import SNAPPY

    good = encode_batch([(b"k", b"v", [], 1000)])
    blob = b"\xff\xff\xff\xff\x0f" + bytes(32)
    header = bytearray(good[:61])
    struct.pack_into(">i", header, 8, 61 + len(blob) - 12)
    struct.pack_into(">h", header, 21, SNAPPY)
    out = bytes(header) + blob
    return out[:17] + struct.pack(">I", crc32c(out[21:])) + out[21:]


async def test_decompression_bombs_on_a_compacted_topic_are_refused(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "bombs", 3, {"cleanup.policy": "compact"})
    bomb = zstd_bomb()
    assert len(bomb) < 64 * 1024
    good = encode_batch([(b"k", b"v", [], 1000)])
    response = await asyncio.wait_for(client.request(PRODUCE, 9, produce_body({
        ("bombs", 0): bomb, ("bombs", 1): snappy_claiming_4_gib(), ("bombs", 2): good})), 5.0)
    assert partition_errors(response) == {("bombs", 0): ErrorCode.RECORD_LIST_TOO_LARGE,
                                          ("bombs", 1): ErrorCode.RECORD_LIST_TOO_LARGE,
                                          ("bombs", 2): ErrorCode.NONE}
    partitions = async_broker.replica_manager.partitions
    assert [partitions[("bombs", i)].log_end_offset for i in range(3)] == [0, 0, 1]
    await served_promptly(async_broker.port)
    await client.close()


async def test_list_offsets_by_timestamp_over_a_stored_bomb(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "plain-bomb")
    # A producer's bomb is refused on any topic: its records are counted, so inflated
    response = await client.request(PRODUCE, 9, produce_body({("plain-bomb", 0): zstd_bomb()}))
    assert partition_errors(response) == {("plain-bomb", 0): ErrorCode.RECORD_LIST_TOO_LARGE}
    # One stored by a follower (its leader's batches are appended as they are)
    log = async_broker.replica_manager.partitions[("plain-bomb", 0)].log
    log.append_as_follower(zstd_bomb())
    assert log.log_end_offset == 1
    response = await asyncio.wait_for(client.request(LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "plain-bomb", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": 500}]}]}), 5.0)
    assert response.topics[0].partitions[0].error_code == ErrorCode.RECORD_LIST_TOO_LARGE
    await served_promptly(async_broker.port)
    await client.close()


async def test_compressed_batch_for_a_compacted_topic_is_decoded_off_the_event_loop(
    async_broker, monkeypatch
):
    """Inflating and decoding ~400,000 records takes about a second: it runs in a worker thread,
    so another connection is served meanwhile; the append then does not decode them again."""
    import threading

    import storage.log  # the replica manager imports the check from it when a produce runs
    from protocol.records import ZSTD

    threads: list[threading.Thread] = []
    check = storage.log.check_batches_records
    loop = asyncio.get_running_loop()
    started = asyncio.Event()

    def recording_check(*args):
        threads.append(threading.current_thread())
        loop.call_soon_threadsafe(started.set)
        return check(*args)

    monkeypatch.setattr(storage.log, "check_batches_records", recording_check)
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "busy", 1, {"cleanup.policy": "compact"})
    many = encode_batch([(b"k%d" % (i % 10), b"", [], 1000) for i in range(400_000)],
                        compression=ZSTD)
    produced = asyncio.ensure_future(client.request(PRODUCE, 9, produce_body({("busy", 0): many})))
    await asyncio.wait_for(started.wait(), 10.0)  # the check has started in its thread
    await served_promptly(async_broker.port)
    response = await asyncio.wait_for(produced, 30.0)
    assert partition_errors(response) == {("busy", 0): ErrorCode.NONE}
    assert threads[0] is not threading.main_thread()
    assert async_broker.replica_manager.partitions[("busy", 0)].log_end_offset == 400_000
    # A null key in a compressed batch is still refused, from the thread.
    keyless = encode_batch([(b"k", b"v", [], 1000), (None, b"v", [], 1000)], compression=ZSTD)
    response = await client.request(PRODUCE, 9, produce_body({("busy", 0): keyless}))
    assert partition_errors(response) == {("busy", 0): ErrorCode.INVALID_RECORD}
    assert len(threads) == 2
    await client.close()


async def test_list_offsets_by_timestamp_decodes_compressed_batches_off_the_event_loop(
    async_broker, monkeypatch
):
    """A timestamp lookup that has to inflate and decode a large compressed batch does it in a
    worker thread: another connection is served meanwhile, and the answer is right."""
    import threading

    from broker.replication import partition  # the lookup's caller (Partition)
    from protocol.records import ZSTD

    threads: list[threading.Thread] = []
    find = partition.first_record_at_or_after
    loop = asyncio.get_running_loop()
    started = asyncio.Event()

    def recording_find(*args):
        threads.append(threading.current_thread())
        loop.call_soon_threadsafe(started.set)
        return find(*args)

    monkeypatch.setattr(partition, "first_record_at_or_after", recording_find)
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "stamps")
    count = 400_000
    many = encode_batch([(None, b"", [], 1000 if i < count - 1 else 2000) for i in range(count)],
                        compression=ZSTD)
    response = await client.request(PRODUCE, 9, produce_body({("stamps", 0): many}))
    assert set(partition_errors(response).values()) == {ErrorCode.NONE}
    lookup = asyncio.ensure_future(client.request(LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "stamps", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": 1500}]}]}))
    await asyncio.wait_for(started.wait(), 10.0)
    await served_promptly(async_broker.port)
    response = await asyncio.wait_for(lookup, 30.0)
    p0 = response.topics[0].partitions[0]
    assert (p0.error_code, p0.offset, p0.timestamp) == (ErrorCode.NONE, count - 1, 2000)
    assert threads and threads[0] is not threading.main_thread()
    await client.close()


async def test_elections_and_reassignments_of_many_partitions_leave_others_served(async_broker):
    """Every partition of one request is an entry of the controller's answer: 20,000 of them
    (20 of the controller's steps aside) are answered while another connection is served. (The
    request's decoding is not stepped: at 100,000 entries it alone holds the loop ~0.5 s, which a
    loaded machine stretches past the second this allows.)"""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "few")
    many = 20_000
    bodies = [
        (43, 2, {"election_type": 1, "timeout_ms": 1000, "topic_partitions": [
            {"topic": "few", "partitions": list(range(many))}]}),
        (45, 0, {"topics": [{"name": "few", "partitions": [
            {"partition_index": i, "replicas": [0]} for i in range(1, many)]}]}),
    ]
    frames = [encode_frame(encode_request_header(key, version, 1, "hostile")
                           + encode_request(key, version, body)) for key, version, body in bodies]
    for frame in frames:
        await client.send_raw(frame)
        await served_promptly(async_broker.port)
        await asyncio.wait_for(client.read_frame(), 10.0)  # answered, too
    await client.close()


async def test_alter_replica_log_dirs_naming_made_up_partitions_keeps_no_state(async_broker):
    """AlterReplicaLogDirs remembers a dir for a partition not hosted yet (Kafka's preferred log
    dirs): a request naming 100,000 partitions the cluster does not have is answered
    REPLICA_NOT_AVAILABLE and leaves nothing behind; other connections are served meanwhile."""
    client = await RawClient.connect(async_broker.port)
    log_dir = os.path.abspath(next(iter(async_broker.log_manager.dirs)))
    sent = await client.send(34, 2, {"dirs": [
        {"path": log_dir, "topics": [{"name": f"t{i}", "partitions": list(range(100))}
                                     for i in range(1000)]},
        {"path": "/not/a/log/dir", "topics": [{"name": "x", "partitions": [0]}]}]})
    await served_promptly(async_broker.port)  # while that one is read and answered
    response = await client.receive(34, 2, sent)
    codes = {p.error_code for t in response.results for p in t.partitions}
    assert codes == {ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.LOG_DIR_NOT_FOUND}
    assert async_broker.log_manager.preferred_log_dirs == {}
    await client.close()


def declaring(records: int, batch: bytes) -> bytes:
    """`batch` with a header declaring `records` records (count and lastOffsetDelta, CRC made
    anew): a CRC-valid batch whose count lies about what it holds."""
    out = bytearray(batch)
    struct.pack_into(">i", out, 23, records - 1)  # lastOffsetDelta
    struct.pack_into(">i", out, 57, records)  # record count
    return bytes(out[:17]) + struct.pack(">I", crc32c(bytes(out[21:]))) + bytes(out[21:])


async def test_a_batch_whose_record_count_lies_is_refused_alone(async_broker):
    """Kafka's LogValidator reads the records: a count above or below what the batch holds is
    INVALID_RECORD ("Incorrect declared batch size") and nothing of it is stored, compressed or
    not, on a plain or a compacted topic; the other partitions of the request are appended."""
    from protocol.records import ZSTD

    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "counted", 4)
    await create_topic(client, "counted-compact", 1, {"cleanup.policy": "compact"})
    one = encode_batch([(b"k", b"v", [], 1000)])
    two = encode_batch([(b"k", b"v", [], 1000), (None, b"hidden", [], 1000)])
    response = await client.request(PRODUCE, 9, produce_body({
        ("counted", 0): declaring(2_000_000_000, one),  # would move the LEO by two billion
        ("counted", 1): declaring(1, two),  # a second record the header hides
        ("counted", 2): declaring(3, encode_batch([(b"k", b"v", [], 1000)] * 2,
                                                  compression=ZSTD)),
        ("counted", 3): one,
        ("counted-compact", 0): declaring(1, two),  # its hidden record has no key
    }))
    assert partition_errors(response) == {
        ("counted", 0): ErrorCode.INVALID_RECORD, ("counted", 1): ErrorCode.INVALID_RECORD,
        ("counted", 2): ErrorCode.INVALID_RECORD, ("counted", 3): ErrorCode.NONE,
        ("counted-compact", 0): ErrorCode.INVALID_RECORD}
    partitions = async_broker.replica_manager.partitions
    assert [partitions[("counted", i)].log_end_offset for i in range(4)] == [0, 0, 0, 1]
    assert partitions[("counted-compact", 0)].log_end_offset == 0
    await served_promptly(async_broker.port)
    await client.close()


async def test_one_metadata_auto_creating_colliding_names_creates_the_first(async_broker):
    """a.b and a_b in one auto-creating Metadata: they are created concurrently, yet only one
    is, the other refused INVALID_TOPIC_EXCEPTION (a metric name is one topic's)."""
    client = await RawClient.connect(async_broker.port)
    response = await client.request(METADATA, 9, {
        "topics": [{"name": "m.x"}, {"name": "m_x"}, {"name": "m-x"}],
        "allow_auto_topic_creation": True})
    errors = {t.name: t.error_code for t in response.topics}
    assert errors == {"m.x": ErrorCode.LEADER_NOT_AVAILABLE,
                      "m_x": ErrorCode.INVALID_TOPIC_EXCEPTION,
                      "m-x": ErrorCode.LEADER_NOT_AVAILABLE}
    await async_broker.metadata_cache.wait_for(lambda s: "m-x" in s.topics and "m.x" in s.topics,
                                               30_000)
    assert "m_x" not in async_broker.metadata_cache.topics
    await client.close()


async def test_zstd_in_a_produce_below_v7_is_refused_alone(async_broker):
    """KIP-110: a client that asked for zstd speaks Produce v7+; a zstd batch in an older
    Produce gets UNSUPPORTED_COMPRESSION_TYPE for its partition, as Kafka's validateRecords, and
    the other partitions are appended."""
    from protocol.records import ZSTD

    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "zstd-old", 2)
    zstd = encode_batch([(b"k", b"v", [], 1000)], compression=ZSTD)
    body = produce_body({("zstd-old", 0): zstd, ("zstd-old", 1): encode_batch([(b"k", b"v", [], 1000)])})
    response = await client.request(PRODUCE, 6, body)
    assert partition_errors(response) == {("zstd-old", 0): ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                          ("zstd-old", 1): ErrorCode.NONE}
    response = await client.request(PRODUCE, 7, produce_body({("zstd-old", 0): zstd}))
    assert partition_errors(response) == {("zstd-old", 0): ErrorCode.NONE}
    partitions = async_broker.replica_manager.partitions
    assert [partitions[("zstd-old", p)].log_end_offset for p in (0, 1)] == [1, 1]
    await client.close()
