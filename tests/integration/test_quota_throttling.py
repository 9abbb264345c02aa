"""Client quotas enforced as Kafka does: on the manual clock, the throttle_time_ms a produce, a
fetch and a request-time violation earn (Kafka's formula over 11 one-second samples) and the
connection muted that long after its response; and a real producer slowed to its byte rate."""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Producer
from kafka import KafkaProducer

from broker.server.cluster import Cluster
from protocol import encode_request
from protocol.errors import ErrorCode
from protocol.headers import encode_request_header
from protocol.records import encode_batch
from tests.harness import cluster_config, until, watches_settled
from tests.integration.raw_client import RawClient
from tests.integration.test_client_quotas import alter, entity, op
from tests.integration.test_hostile_input import served_promptly
from tests.integration.test_protocol_edges import (
    API_VERSIONS,
    FETCH,
    METADATA,
    PRODUCE,
    create_topic,
    produce_body,
)
from timer import ManualClock

METADATA_BODY = {"topics": None, "allow_auto_topic_creation": False,
                 "include_topic_authorized_operations": False}
STOP_REPLICA = 5
WINDOW_MS = 10_000  # a first burst is measured over quota.window.num - 1 whole windows


async def started(tmp_path, overrides: dict[str, str] | None = None):
    clock = ManualClock(1_000)
    cluster = Cluster(cluster_config(tmp_path, overrides), 1, clock=clock)
    await cluster.start()
    broker = cluster.brokers[0]
    await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
    return clock, cluster, broker


async def settle() -> None:
    for _ in range(200):  # every chance for a wrongly early unmute to happen
        await asyncio.sleep(0)


def frame_size(api_key: int, version: int, body: dict) -> int:
    """What Kafka's request.sizeInBytes counts: the header and the body."""
    return len(encode_request_header(api_key, version, 1, "raw-test")
               + encode_request(api_key, version, body))


def throttle_ms(value: float, bound: float) -> int:
    """Kafka's throttle time for a first record of `value` against `bound` per second."""
    rate = value / (WINDOW_MS / 1000)
    return int((rate - bound) / bound * WINDOW_MS + 0.5)


async def test_produce_over_its_byte_rate_answers_throttle_and_mutes(tmp_path):
    clock, cluster, broker = await started(tmp_path)
    try:
        admin = await RawClient.connect(broker.port)
        await create_topic(admin, "q")
        await alter(admin, [(entity(client_id="raw-test"), [op("producer_byte_rate", 1000)])])
        await watches_settled()  # the broker applies it once its watch reads the notification
        client = await RawClient.connect(broker.port)
        body = produce_body({("q", 0): encode_batch([(None, b"x" * 12_000, [], 0)])})
        expected = throttle_ms(frame_size(PRODUCE, 9, body), 1000)
        assert 1_000 < expected < 4_000
        response = await client.request(PRODUCE, 9, body)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert response.throttle_time_ms == expected
        throttled = broker.quotas.throttled
        await until(lambda: throttled.delayed == 1)
        # Muted: the next request on this connection is not read until the delay is over,
        # while other connections are served
        reply = asyncio.ensure_future(client.request(METADATA, 12, METADATA_BODY))
        await served_promptly(broker.port)
        clock.advance(expected - 1)
        await settle()
        assert not reply.done()
        assert broker.purgatory_stats()["throttle"]["delayed"] == 1
        clock.advance(1)
        answer = await asyncio.wait_for(reply, 10)
        assert answer.throttle_time_ms == 0  # metadata is no produce: within its quotas
        stats = broker.purgatory_stats()["throttle"]
        assert (stats["delayed"], stats["throttled"]["produce"]) == (0, 1)
        # acks=0 answers nothing but is still muted for its bytes (the rate is above the bound)
        await client.send(PRODUCE, 9, {**body, "acks": 0})
        await until(lambda: throttled.delayed == 1)
        assert throttled.throttled["produce"] == 2
        await client.close()
        await admin.close()
    finally:
        await cluster.stop()


def fetch_body(topic: str) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": 0,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": []}


async def test_fetch_over_its_byte_rate_answers_empty_and_opens_no_session(tmp_path):
    clock, cluster, broker = await started(tmp_path)
    try:
        admin = await RawClient.connect(broker.port)
        await create_topic(admin, "f")
        batch = encode_batch([(None, b"y" * 3_000, [], 0)])
        await admin.request(PRODUCE, 9, produce_body({("f", 0): batch}))
        await alter(admin, [(entity(user=None), [op("consumer_byte_rate", 200)])])
        await watches_settled()
        consumer = await RawClient.connect(broker.port)
        response = await consumer.request(FETCH, 12, fetch_body("f"))
        # the response would have carried the batch and the partition's fixed fields
        assert response.throttle_time_ms == throttle_ms(len(batch) + 42, 200)
        assert (response.error_code, response.session_id, response.responses) == (0, 0, [])
        sessions = broker.replica_manager.fetch_manager.cache
        assert len(sessions.sessions) == 0
        # the bytes it did not get are taken back: the rate is where it was
        sensor = broker.quotas.fetch.sensor("ANONYMOUS", "raw-test")
        assert sensor.measure(clock.now_ms()) == 0
        assert broker.quotas.throttled.throttled["fetch"] == 1
        # max_bytes is capped at what the quota allows in its window (200 B/s * 10 s): still
        # one batch, as Kafka always returns the first batch
        await consumer.close()
        await admin.close()
    finally:
        await cluster.stop()


async def test_request_percentage_throttles_by_handler_time(tmp_path):
    clock, cluster, broker = await started(tmp_path)
    try:
        admin = await RawClient.connect(broker.port)
        await alter(admin, [(entity(user=None, client_id=None), [op("request_percentage", 1e-9)])])
        await watches_settled()
        assert (await broker.store.get_json("/config/users/<default>/clients/<default>"))[0] == {
            "version": 1, "config": {"request_percentage": "1.0E-9"}}
        client = await RawClient.connect(broker.port)
        # any time at all is far above 1e-9 %: the throttle is capped at one quota window
        response = await client.request(METADATA, 12, METADATA_BODY)
        assert response.throttle_time_ms == 1000
        reply = asyncio.ensure_future(client.request(API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}))
        clock.advance(999)
        await settle()
        assert not reply.done()
        clock.advance(1)
        # ApiVersions is throttled too (Kafka exempts only the inter-broker APIs)
        assert (await asyncio.wait_for(reply, 10)).throttle_time_ms == 1000
        clock.advance(1000)
        # an inter-broker request (a stale StopReplica) is exempt: no mute after its answer
        stale = await client.request(STOP_REPLICA, 3, {
            "controller_id": 0, "controller_epoch": -5, "broker_epoch": -1, "topic_states": []})
        assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        answer = await asyncio.wait_for(client.request(METADATA, 12, METADATA_BODY), 10)
        assert answer.throttle_time_ms == 1000
        assert broker.quotas.throttled.throttled["request"] == 3
        await client.close()
        await admin.close()
    finally:
        await cluster.stop()


def test_kafka_python_producer_is_slowed_to_its_byte_rate(broker_factory):
    # Two one-second samples: the rate is measured over at least one second, so the test
    # needs seconds, not the default's ten
    broker = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})

    async def set_quota() -> None:
        admin = await RawClient.connect(broker.port)
        await alter(admin, [(entity(client_id="slow"), [op("producer_byte_rate", 100_000)])])
        await watches_settled()
        await admin.close()

    broker.call(set_quota)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="slow",
                             batch_size=16_384, linger_ms=5)
    producer.send("slowed", b"warm-up").get(30)
    value = b"z" * 1000
    started_at = time.monotonic()
    for _ in range(300):
        producer.send("slowed", value)
    producer.flush(60)
    elapsed = time.monotonic() - started_at
    producer.close()
    # 300 KB at 100 KB/s: the first second's worth is free, then the quota holds it back
    assert elapsed >= 1.0, elapsed
    assert 300_000 / elapsed < 250_000
    server = broker.cluster.brokers[0]
    assert broker.call(lambda: server.quotas.throttled.throttled["produce"]) > 0


async def test_a_throttled_incremental_fetch_keeps_its_session(tmp_path):
    clock, cluster, broker = await started(tmp_path)
    try:
        admin = await RawClient.connect(broker.port)
        await create_topic(admin, "s")
        batch = encode_batch([(None, b"w" * 3_000, [], 0)])
        await admin.request(PRODUCE, 9, produce_body({("s", 0): batch}))
        consumer = await RawClient.connect(broker.port)

        def at(offset: int, session_id: int, epoch: int) -> dict:
            body = fetch_body("s")
            body["topics"][0]["partitions"][0]["fetch_offset"] = offset
            return {**body, "session_id": session_id, "session_epoch": epoch}

        opened = await consumer.request(FETCH, 12, at(1, 0, 0))  # past the batch: nothing new
        session = opened.session_id
        assert session != 0
        await alter(admin, [(entity(user=None), [op("consumer_byte_rate", 200)])])
        await watches_settled()
        throttled = await consumer.request(FETCH, 12, at(0, session, 1))  # the batch: too much
        assert throttled.throttle_time_ms > 0
        assert (throttled.error_code, throttled.session_id, throttled.responses) == (0, session, [])
        clock.advance(throttled.throttle_time_ms)
        # the session moved to epoch 2 as for any answer: the client's next epoch is accepted
        after = await asyncio.wait_for(consumer.request(FETCH, 12, at(1, session, 2)), 10)
        assert (after.error_code, after.session_id, after.throttle_time_ms) == (0, session, 0)
        await consumer.close()
        await admin.close()
    finally:
        await cluster.stop()


def test_confluent_kafka_reports_the_brokers_throttle_time(broker_factory):
    """librdkafka hands the throttle_time_ms of a response to the application (throttle_cb)."""
    broker = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})

    async def set_quota() -> None:
        admin = await RawClient.connect(broker.port)
        await alter(admin, [(entity(client_id="ck"), [op("producer_byte_rate", 50_000)])])
        await watches_settled()
        await admin.close()

    broker.call(set_quota)
    events = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "ck",
                         "throttle_cb": events.append, "linger.ms": 5})
    for _ in range(150):  # 150 KB: three times what the quota allows in its one-second window
        producer.produce("ck-topic", b"z" * 1000)
        producer.poll(0)
    assert producer.flush(30) == 0
    deadline = time.monotonic() + 10
    while not events and time.monotonic() < deadline:
        producer.poll(0.1)
    assert events and all(e.broker_id == 0 and e.throttle_time > 0 for e in events), events
    server = broker.cluster.brokers[0]
    assert broker.call(lambda: server.quotas.throttled.throttled["produce"]) >= len(events)
