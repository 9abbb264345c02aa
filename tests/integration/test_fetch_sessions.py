"""Fetch sessions (KIP-227) on a real listener: the raw protocol's full, incremental, forgotten,
erred and closed fetches, hostile session fields as raw bytes, and what real clients do with them
(kafka-python opens an incremental session; librdkafka fetches sessionless)."""

from __future__ import annotations

import asyncio
import struct
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from broker.replication import purgatory_view
from broker.replication.fetch_session import SessionWatch
from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic, served_promptly
from tests.integration.test_protocol_edges import produce_body

PRODUCE, FETCH = 0, 1


def fetch_body(session_id: int, epoch: int, partitions: dict[int, int], *, topic: str = "fs",
               forgotten: list[int] | None = None, max_wait_ms: int = 0, min_bytes: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": 1 << 20, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
                for p, o in partitions.items()]}] if partitions else [],
            "forgotten_topics_data": [{"topic": topic, "partitions": forgotten}] if forgotten
            else []}


def answered(response) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, bytes of records)."""
    return {p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in response.responses for p in t.partitions}


async def produce_one(client: RawClient, partition: int, value: bytes = b"v") -> None:
    response = await client.request(PRODUCE, 9, produce_body(
        {("fs", partition): encode_batch([(None, value, [], 1)])}))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


async def test_session_lifecycle_over_the_wire(async_broker):
    sessions = async_broker.replica_manager.fetch_manager
    client = await RawClient.connect(async_broker.port)
    producer = await RawClient.connect(async_broker.port)
    await create_topic(client, "fs", 3)
    await produce_one(producer, 0)

    full = await client.request(FETCH, 12, fetch_body(0, 0, {0: 0, 1: 0, 2: 0}))
    assert full.error_code == ErrorCode.NONE and full.session_id != 0
    assert answered(full)[0][2] > 0 and set(answered(full)) == {0, 1, 2}
    sid = full.session_id
    assert sessions.stats()["sessions"] == 1 and sessions.stats()["partitions"] == 3

    # The consumer moved partition 0 on: nothing new anywhere, so nothing is answered.
    quiet = await client.request(FETCH, 12, fetch_body(sid, 1, {0: 1}))
    assert (quiet.error_code, quiet.session_id, answered(quiet)) == (ErrorCode.NONE, sid, {})

    # A parked incremental fetch naming no partition wakes for a partition only its session has.
    parked = asyncio.create_task(client.request(FETCH, 12, fetch_body(
        sid, 2, {}, max_wait_ms=30_000, min_bytes=1)))
    await asyncio.sleep(0)
    await produce_one(producer, 2)
    woken = await asyncio.wait_for(parked, 5)
    assert answered(woken) == {2: (ErrorCode.NONE, 1, answered(woken)[2][2])}
    assert answered(woken)[2][2] > 0

    forgot = await client.request(FETCH, 12, fetch_body(sid, 3, {2: 1}, forgotten=[1]))
    assert answered(forgot) == {} and sessions.stats()["partitions"] == 2

    stale = await client.request(FETCH, 12, fetch_body(sid, 3, {}))
    assert (stale.error_code, stale.session_id, stale.responses) == (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    unknown = await client.request(FETCH, 12, fetch_body(sid ^ 1, 4, {}))
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    closed = await client.request(FETCH, 12, fetch_body(sid, -1, {0: 0}))
    assert (closed.error_code, closed.session_id, set(answered(closed))) == (
        ErrorCode.NONE, 0, {0})
    assert sessions.stats()["sessions"] == 0
    await client.close()
    await producer.close()
    await served_promptly(async_broker.port)


def raw_fetch_v7(correlation_id: int, session_id: int, epoch: int, *, forget: bytes = b"") -> bytes:
    """A Fetch v7 (the first with session fields) written byte by byte: no topics, and the
    forgotten-topics array as given (or empty)."""
    client_id = b"hostile"
    header = struct.pack(">hhih", FETCH, 7, correlation_id, len(client_id)) + client_id
    body = struct.pack(">iiiibii", -1, 0, 0, 1 << 20, 0, session_id, epoch)
    body += struct.pack(">i", 0)  # topics
    body += forget or struct.pack(">i", 0)
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


async def read_v7_answer(client: RawClient) -> tuple[int, int, int, int]:
    """(correlation id, error, session id, topics answered) of a Fetch v7 response."""
    frame = await asyncio.wait_for(client.read_frame(), 5)
    correlation_id, _throttle, error, session_id, topics = struct.unpack(">iihii", frame[:18])
    return correlation_id, error, session_id, topics


async def test_hostile_session_fields_as_raw_bytes(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "fs", 1)
    await client.send(FETCH, 12, fetch_body(0, 0, {0: 0}))
    sid = (await client.receive(FETCH, 12, client.correlation_id)).session_id
    cases = [
        (2**31 - 1, 1, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (-5, 3, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (0, 7, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),  # no session yet claims an epoch
        (sid, -2**31, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (sid, 2**31 - 1, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
    ]
    for n, (session_id, epoch, error) in enumerate(cases, start=100):
        await client.send_raw(raw_fetch_v7(n, session_id, epoch))
        assert await read_v7_answer(client) == (n, error, 0, 0)
    # Forgetting a partition the session never had, and a topic that does not exist, is a no-op.
    forget = struct.pack(">ih", 2, 2) + b"fs" + struct.pack(">iiii", 3, 0, 5, -1)
    forget += struct.pack(">h", 4) + b"nope" + struct.pack(">ii", 1, 0)
    await client.send_raw(raw_fetch_v7(200, sid, 1, forget=forget))
    correlation_id, error, session_id, _ = await read_v7_answer(client)
    assert (correlation_id, error) == (200, ErrorCode.NONE)
    # Partition 0 was forgotten: the session is empty, so it is closed and the answer sessionless.
    assert session_id == 0
    assert async_broker.replica_manager.fetch_manager.stats()["sessions"] == 0
    await served_promptly(async_broker.port)
    await client.close()


def consumer_stats(kafka_broker) -> dict:
    return kafka_broker.call(
        lambda: kafka_broker.cluster.brokers[0].replica_manager.fetch_manager.stats())


def poll_until(consumer, count: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for tp, records in consumer.poll(200).items():
            got.extend((tp.partition, r.value) for r in records)
    return got


def test_kafka_python_consumes_through_an_incremental_session(kafka_broker):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("kp-sessions", 4, 1)])["kp-sessions"].result(10)
    for i in range(20):
        producer.send("kp-sessions", b"a%d" % i, partition=i % 4)
    producer.flush()
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, fetch_max_wait_ms=100)
    consumer.assign([KpTopicPartition("kp-sessions", p) for p in range(4)])
    consumer.seek_to_beginning()
    first = poll_until(consumer, 20)
    before = consumer_stats(kafka_broker)
    # New records after the session is open reach the consumer through incremental fetches.
    for i in range(20):
        producer.send("kp-sessions", b"b%d" % i, partition=i % 4)
    producer.flush()
    second = poll_until(consumer, 20)
    after = consumer_stats(kafka_broker)
    consumer.close()
    producer.close()
    for got, prefix in ((first, b"a"), (second, b"b")):
        assert sorted(got) == sorted((i % 4, prefix + b"%d" % i) for i in range(20))
    assert (after["sessions"], after["privileged"], after["partitions"]) == (1, 0, 4)
    assert after["fetches"]["full"] == 1  # one session, opened once
    assert after["fetches"]["incremental"] > before["fetches"]["incremental"]
    assert after["fetches"]["error"] == 0


def test_librdkafka_fetches_sessionless_and_takes_no_slot(kafka_broker):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("ck-sessions", 3, 1)])["ck-sessions"].result(10)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for i in range(30):
        producer.produce("ck-sessions", b"v%d" % i, partition=i % 3)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    consumer.assign([CkTopicPartition("ck-sessions", p, 0) for p in range(3)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 30 and time.monotonic() < deadline:
        got.extend(m.value() for m in consumer.consume(30, timeout=0.2) if m.error() is None)
    consumer.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(30))
    stats = consumer_stats(kafka_broker)
    # librdkafka (2.x) sends session_id 0 and epoch -1 on every Fetch: sessionless, as Kafka
    # serves it, and no slot of the cache is taken.
    assert stats["sessions"] == 0 and stats["fetches"]["sessionless"] > 0
    assert stats["fetches"]["full"] == stats["fetches"]["incremental"] == 0


async def test_a_partition_fault_matches_an_incremental_fetch_that_does_not_name_it(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "fs", 2)
    full = await client.request(FETCH, 12, fetch_body(0, 0, {0: 0, 1: 0}))
    faults = async_broker.context.faults
    fault = faults.add(0, "Fetch", partition=("fs", 1), error="NOT_LEADER_OR_FOLLOWER", count=1)
    # The session reads partition 1 although this request names only partition 0.
    await client.request(FETCH, 12, fetch_body(full.session_id, 1, {0: 0}))
    assert fault.hits == 1 and faults.list() == []
    # Not so for a full fetch that leaves it out.
    fault = faults.add(0, "Fetch", partition=("fs", 1), error="NOT_LEADER_OR_FOLLOWER", count=1)
    await client.request(FETCH, 12, fetch_body(0, -1, {0: 0}))
    assert fault.hits == 0
    faults.clear()
    await client.close()


async def test_a_consumer_session_reads_only_what_changed(async_broker):
    """Ten partitions in a session: an incremental fetch reads the partitions it names and those
    that changed (records, log start, HW), and answers them; the idle ones are not read at all."""
    stats = async_broker.replica_manager.fetch_manager.stats
    client = await RawClient.connect(async_broker.port)
    producer = await RawClient.connect(async_broker.port)
    await create_topic(client, "fs", 10)
    await produce_one(producer, 3)
    full = await client.request(FETCH, 12, fetch_body(0, 0, dict.fromkeys(range(10), 0)))
    sid, epoch = full.session_id, 1
    assert sid != 0 and answered(full)[3][2] > 0

    async def incremental(named: dict[int, int]) -> tuple[dict, int]:
        nonlocal epoch
        before = stats()["partitions_read"]
        response = await client.request(FETCH, 12, fetch_body(sid, epoch, named))
        epoch += 1
        assert response.error_code == ErrorCode.NONE
        return answered(response), stats()["partitions_read"] - before

    assert await incremental({3: 1}) == ({}, 1)  # the moved one only: nothing new there
    assert await incremental({}) == ({}, 0)
    await produce_one(producer, 6)  # a partition the session has but no request names
    got, read = await incremental({})
    assert set(got) == {6} and got[6][1] == 1 and got[6][2] > 0 and read == 1
    deleted = await client.request(21, 2, {"topics": [{"name": "fs", "partitions": [
        {"partition_index": 3, "offset": 1}]}], "timeout_ms": 5_000})
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE
    response = await client.request(FETCH, 12, fetch_body(sid, epoch, {6: 1}))
    epoch += 1
    [partition_3] = [p for t in response.responses for p in t.partitions]
    assert (partition_3.partition_index, partition_3.log_start_offset) == (3, 1)
    assert await incremental({}) == ({}, 0)
    await client.close()
    await producer.close()


async def test_a_parked_incremental_fetch_is_watched_once_whatever_its_sessions_size(
        async_broker):
    """Parking a narrowed incremental fetch costs one watcher, not one per partition of its
    session; an append to any of those partitions wakes it (through the sessions holding it)."""
    purgatory = async_broker.replica_manager.fetch_purgatory
    client = await RawClient.connect(async_broker.port)
    producer = await RawClient.connect(async_broker.port)
    await create_topic(client, "fs", 200)
    full = await client.request(FETCH, 12, fetch_body(0, 0, dict.fromkeys(range(200), 0)))
    sid = full.session_id
    assert sid != 0 and len(answered(full)) == 200
    parked = asyncio.create_task(client.request(FETCH, 12, fetch_body(
        sid, 1, {}, max_wait_ms=3_600_000, min_bytes=1)))
    await until(lambda: purgatory.delayed == 1)
    assert purgatory_view.num_watched(purgatory) == 1
    assert purgatory_view.watched(purgatory, SessionWatch(sid)) == 1
    await produce_one(producer, 137)
    woken = await asyncio.wait_for(parked, 10)
    assert list(answered(woken)) == [137] and answered(woken)[137][:2] == (ErrorCode.NONE, 1)
    assert purgatory.delayed == 0
    await client.close()
    await producer.close()
