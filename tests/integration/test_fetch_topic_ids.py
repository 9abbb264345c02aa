"""Fetch v13-17 on a real listener: topics by id in requests, answers and forgotten topics, fetch
sessions keyed by topic id, UNKNOWN_TOPIC_ID / INCONSISTENT_TOPIC_ID / FETCH_SESSION_TOPIC_ID_ERROR,
hostile ids, and real clients negotiating the new versions."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid

from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

from protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient
from tests.integration.test_fetch_sessions import answered, fetch_body, produce_one
from tests.integration.test_hostile_input import create_topic, served_promptly

FETCH, METADATA, DELETE_TOPICS = 1, 3, 20


async def topic_id(client: RawClient, name: str) -> uuid.UUID:
    response = await client.request(METADATA, 12, {
        "topics": [{"name": name}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    return uuid.UUID(bytes=bytes(response.topics[0].topic_id))


def fetch_by_id(session_id: int, epoch: int, tid: uuid.UUID, partitions: dict[int, int], *,
                forgotten: list[int] | None = None) -> dict:
    """A v13+ Fetch body: the topic named by its id (v17's replica_directory_id set: ignored)."""
    return {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic_id": tid.bytes, "partitions": [
                {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20,
                 "replica_directory_id": uuid.uuid4().bytes}
                for p, o in partitions.items()]}] if partitions else [],
            "forgotten_topics_data": [{"topic_id": tid.bytes, "partitions": forgotten}]
            if forgotten else []}


def answered_ids(response) -> dict[tuple[uuid.UUID, int], int]:
    """(topic id, partition) -> error code."""
    return {(uuid.UUID(bytes=bytes(t.topic_id)), p.partition_index): p.error_code
            for t in response.responses for p in t.partitions}


async def test_session_by_topic_id_over_v13_to_v17(async_broker):
    sessions = async_broker.replica_manager.fetch_manager
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "fs", 2)
    tid = await topic_id(client, "fs")
    assert tid.int != 0
    await produce_one(client, 0)
    for version in (13, 14, 15, 16, 17):
        full = await client.request(FETCH, version, fetch_by_id(0, 0, tid, {0: 0, 1: 0}))
        assert full.error_code == ErrorCode.NONE and full.session_id != 0
        assert answered_ids(full) == {(tid, 0): 0, (tid, 1): 0}
        assert answered(full)[0][2] > 0  # the record, answered under the topic's id
        sid = full.session_id
        quiet = await client.request(FETCH, version, fetch_by_id(sid, 1, tid, {0: 1}))
        assert (quiet.error_code, quiet.session_id, answered(quiet)) == (ErrorCode.NONE, sid, {})
        forgot = await client.request(FETCH, version, fetch_by_id(sid, 2, tid, {}, forgotten=[1]))
        assert forgot.error_code == ErrorCode.NONE
        assert len(sessions.cache.get(sid).partitions) == 1
        # The session was opened by ids: going on by names is refused, as Kafka does.
        by_name = await client.request(FETCH, 12, fetch_body(sid, 3, {0: 1}))
        assert by_name.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        await client.request(FETCH, version, fetch_by_id(sid, -1, tid, {}))  # close it
    named = await client.request(FETCH, 12, fetch_body(0, 0, {0: 0}))
    by_id = await client.request(FETCH, 17, fetch_by_id(named.session_id, 1, tid, {}))
    assert by_id.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    await client.close()


async def test_unknown_and_hostile_topic_ids(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "fs", 1)
    tid = await topic_id(client, "fs")
    zero, made_up = uuid.UUID(int=0), uuid.uuid4()
    body = fetch_by_id(0, 0, tid, {0: 0})
    body["topics"] += [{"topic_id": t.bytes, "partitions": [
        {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for p in (0, 7)]}
        for t in (zero, made_up)]
    response = await client.request(FETCH, 17, body)
    assert answered_ids(response) == {
        (tid, 0): ErrorCode.NONE,
        (zero, 0): ErrorCode.UNKNOWN_TOPIC_ID, (zero, 7): ErrorCode.UNKNOWN_TOPIC_ID,
        (made_up, 0): ErrorCode.UNKNOWN_TOPIC_ID, (made_up, 7): ErrorCode.UNKNOWN_TOPIC_ID}
    # The session holds the unknown ones too (Kafka's), and forgets them by id.
    session = async_broker.replica_manager.fetch_manager.cache.get(response.session_id)
    assert len(session.partitions) == 5
    forget = fetch_by_id(response.session_id, 1, made_up, {}, forgotten=[0, 7])
    again = await client.request(FETCH, 17, forget)
    assert answered_ids(again) == {(zero, 0): ErrorCode.UNKNOWN_TOPIC_ID,
                                   (zero, 7): ErrorCode.UNKNOWN_TOPIC_ID}
    assert len(session.partitions) == 3
    # Sessionless, a thousand random ids in one request: each answered, nothing cached.
    hostile = {"max_wait_ms": 30_000, "min_bytes": 1 << 20, "max_bytes": 1 << 20,
               "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
               "topics": [{"topic_id": uuid.uuid4().bytes, "partitions": [
                   {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}
                   for _ in range(1000)]}
    many = await asyncio.wait_for(client.request(FETCH, 17, hostile), 5)
    assert set(answered_ids(many).values()) == {ErrorCode.UNKNOWN_TOPIC_ID}
    assert len(answered_ids(many)) == 1000
    await client.close()
    await served_promptly(async_broker.port)


async def test_recreated_topic_in_a_session_is_inconsistent(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "re", 1)
    old = await topic_id(client, "re")
    full = await client.request(FETCH, 17, fetch_by_id(0, 0, old, {0: 0}))
    assert answered_ids(full) == {(old, 0): ErrorCode.NONE}
    deleted = await client.request(DELETE_TOPICS, 6, {"topics": [{"name": "re"}],
                                                      "timeout_ms": 5000})
    assert deleted.responses[0].error_code == ErrorCode.NONE
    await create_topic(client, "re", 1)
    new = await topic_id(client, "re")
    assert new != old
    # The session still holds the old id under the name "re", now another topic's.
    stale = await client.request(FETCH, 17, fetch_by_id(full.session_id, 1, old, {}))
    assert answered_ids(stale) == {(old, 0): ErrorCode.INCONSISTENT_TOPIC_ID}
    # Asked afresh, the old id is unknown and the new one is read.
    fresh = await client.request(FETCH, 17, fetch_by_id(0, -1, old, {0: 0}))
    assert answered_ids(fresh) == {(old, 0): ErrorCode.UNKNOWN_TOPIC_ID}
    current = await client.request(FETCH, 17, fetch_by_id(0, -1, new, {0: 0}))
    assert answered_ids(current) == {(new, 0): ErrorCode.NONE}
    await client.close()
    await served_promptly(async_broker.port)


def test_kafka_python_infers_3_9_and_consumes_in_a_session(kafka_broker):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    for i in range(20):
        producer.send("kp17", value=b"v%d" % i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("kp17", bootstrap_servers=kafka_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000,
                             fetch_max_wait_ms=100)
    # kafka-python calls a broker 3.9 only if it serves Fetch v17; its own fetcher stops at v12.
    assert consumer._manager.broker_version_data.broker_version == (3, 9)
    values = [r.value for r in consumer]
    consumer.close()
    assert values == [b"v%d" % i for i in range(20)]
    fetches = kafka_broker.call(lambda: kafka_broker.cluster.brokers[0].replica_manager
                                .fetch_manager.stats()["fetches"])
    assert fetches["incremental"] > 0


class FetchVersions(logging.Handler):
    """The Fetch versions librdkafka's protocol debug log says it sent."""

    def __init__(self) -> None:
        super().__init__()
        self.versions: set[int] = set()

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"Sent FetchRequest \(v(\d+)", record.getMessage())
        if found:
            self.versions.add(int(found.group(1)))


def test_confluent_kafka_consumes_at_its_negotiated_fetch_version(kafka_broker):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for i in range(20):
        producer.produce("ck17", value=b"v%d" % i)
    producer.flush(10)
    versions = FetchVersions()
    logger = logging.getLogger("ck17-protocol")
    logger.addHandler(versions)
    logger.setLevel(logging.DEBUG)  # librdkafka logs its protocol lines at debug level
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "ck17",
                         "auto.offset.reset": "earliest", "debug": "protocol"}, logger=logger)
    consumer.subscribe(["ck17"])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    assert values == [b"v%d" % i for i in range(20)]
    # librdkafka 2.16 speaks Fetch up to v16 (KIP-951): negotiated, it uses that, by topic ids.
    assert versions.versions == {16}, versions.versions


async def test_a_partition_fault_matches_a_fetch_naming_its_topic_by_id(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "fs", 2)
    tid = await topic_id(client, "fs")
    faults = async_broker.context.faults
    fault = faults.add(0, "Fetch", partition=("fs", 1), error="NOT_LEADER_OR_FOLLOWER", count=1)
    await client.request(FETCH, 17, fetch_by_id(0, -1, tid, {0: 0}))
    assert fault.hits == 0  # partition 0 only
    answer = await client.request(FETCH, 17, fetch_by_id(0, -1, tid, {1: 0}))
    assert fault.hits == 1 and faults.list() == []
    assert answered_ids(answer) == {(tid, 1): ErrorCode.NOT_LEADER_OR_FOLLOWER}
    await client.close()
