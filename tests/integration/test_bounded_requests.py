"""Requests whose cost a client chooses: each answered with bounded work (a topic named twice
answered once, auto-creation within CreateTopics' partition budget, a bounded number of decoded
elements) and the bytes of large requests in flight bounded per broker, while other clients are
served."""

from __future__ import annotations

import asyncio
import struct

import pytest
from structlog.testing import capture_logs

from broker.network.connection import LARGE_FRAME_BYTES, MAX_REQUEST_ELEMENTS
from protocol.api import encode_request
from protocol.errors import ErrorCode
from protocol.framing import encode_frame
from protocol.headers import encode_request_header
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic, served_promptly

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3


async def test_metadata_answers_a_topic_named_many_times_once(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "wide", partitions=50)
    response = await client.request(METADATA, 1, {"topics": [{"name": "wide"}] * 6000})
    assert [t.name for t in response.topics] == ["wide"]
    assert len(response.topics[0].partitions) == 50
    # v12: each topic once, in the order first named
    response = await client.request(METADATA, 12, {
        "topics": [{"name": "wide", "topic_id": bytes(16)}, {"name": "nope", "topic_id": bytes(16)},
                   {"name": "wide", "topic_id": bytes(16)}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("wide", ErrorCode.NONE), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    await client.close()


@pytest.mark.broker_config({"num.partitions": "2500"})
async def test_auto_creation_by_one_metadata_stays_within_the_partition_budget(async_broker):
    # 10,000 partitions per request, as CreateTopics: four topics of 2,500 fit, the rest are
    # refused whole (POLICY_VIOLATION) and nothing of them is made.
    names = [f"auto-{i}" for i in range(6)]
    client = await RawClient.connect(async_broker.port)
    response = await client.request(METADATA, 9, {
        "topics": [{"name": n} for n in names], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    assert [(t.name, t.error_code) for t in response.topics] == [
        *[(n, ErrorCode.LEADER_NOT_AVAILABLE) for n in names[:4]],
        *[(n, ErrorCode.POLICY_VIOLATION) for n in names[4:]]]
    store = async_broker.store
    assert [await store.exists(f"/brokers/topics/{n}") is not None for n in names] == [
        True] * 4 + [False] * 2
    assert [await store.exists(f"/config/topics/{n}") is not None for n in names[4:]] == [
        False, False]
    await served_promptly(async_broker.port)
    await client.close()


async def test_a_request_of_too_many_elements_closes_its_connection_alone(async_broker):
    # One ListOffsets naming a partition more times than a request may hold elements (each
    # decoded entry is a few hundred bytes): refused before its entries are made.
    client = await RawClient.connect(async_broker.port)
    entry = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "t", "partitions": [entry] * (MAX_REQUEST_ELEMENTS + 1)}]}
    with capture_logs() as logs:
        await client.send(LIST_OFFSETS, 7, body)
        assert await asyncio.wait_for(client.is_closed_by_peer(), 30.0)
    reasons = [e["reason"] for e in logs if e["event"] == "closing connection"]
    assert len(reasons) == 1 and "more array elements than a request may hold" in reasons[0]
    await served_promptly(async_broker.port)
    await client.close()


async def test_a_fetch_naming_a_partition_too_many_times_is_refused_alone(async_broker):
    """The hostile Fetch: one partition named more times than a request may hold elements (a
    hand-built v4 body: 16 bytes an entry). Refused before its entries are made; the broker
    holds none of it afterwards and serves the others meanwhile and after."""
    times = MAX_REQUEST_ELEMENTS + 1
    body = struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0) + struct.pack(">ih", 1, 4) + b"wide"
    body += struct.pack(">i", times) + struct.pack(">iqi", 0, 0, 1 << 20) * times
    client = await RawClient.connect(async_broker.port)
    with capture_logs() as logs:
        await client.send_raw(encode_frame(encode_request_header(FETCH, 4, 1, "t") + body))
        await served_promptly(async_broker.port)  # while it is read and refused
        assert await asyncio.wait_for(client.is_closed_by_peer(), 30.0)
    reasons = [e["reason"] for e in logs if e["event"] == "closing connection"]
    assert len(reasons) == 1 and "more array elements than a request may hold" in reasons[0]
    assert async_broker.request_memory_pool.in_use == 0
    await served_promptly(async_broker.port)
    await client.close()


async def test_a_large_request_is_decoded_and_answered(async_broker):
    # Over LARGE_FRAME_BYTES a body is decoded in a worker thread: the same answer.
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "many", partitions=4)
    count = LARGE_FRAME_BYTES // 16 + 1000
    entries = [{"partition_index": i, "current_leader_epoch": -1, "timestamp": -1}
               for i in range(count)]
    response = await client.request(LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "many", "partitions": entries}]})
    codes = [p.error_code for p in response.topics[0].partitions]
    assert codes == [ErrorCode.NONE] * 4 + [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * (count - 4)
    await client.close()


def _frame_prefix(api_key: int, version: int, body: dict, correlation_id: int) -> bytes:
    payload = encode_request_header(api_key, version, correlation_id, "t") + \
        encode_request(api_key, version, body)
    return encode_frame(payload)


@pytest.mark.broker_config({"queued.max.request.bytes": str(LARGE_FRAME_BYTES * 2)})
async def test_large_requests_wait_for_the_request_memory_pool(async_broker):
    """queued.max.request.bytes: while a large request holds the pool, another large one is not
    read (nor answered), small requests are; once the first is answered the second goes on."""
    pool = async_broker.request_memory_pool
    metadata = {"topics": [{"name": "m"} for _ in range(LARGE_FRAME_BYTES)],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    big = _frame_prefix(METADATA, 9, metadata, 1)
    assert len(big) > LARGE_FRAME_BYTES * 2  # one frame alone takes more than the pool has
    first, second = await RawClient.connect(async_broker.port), await RawClient.connect(
        async_broker.port)
    await first.send_raw(big[: len(big) // 2])  # its size is known: reserved, body still coming
    await until(lambda: pool.in_use == len(big) - 4)
    await second.send_raw(big[:4] + big[4:1000])  # nothing left: waits before reading its body
    await until(lambda: pool.waiting == 1)
    await served_promptly(async_broker.port)  # a small request goes on meanwhile
    assert pool.in_use == len(big) - 4
    await first.send_raw(big[len(big) // 2 :])
    assert (await first.receive(METADATA, 9, 1)).topics[0].name == "m"
    await second.send_raw(big[1000:])
    assert (await second.receive(METADATA, 9, 1)).topics[0].name == "m"
    assert pool.in_use == 0
    await first.close()
    await second.close()



async def test_a_burst_of_topic_creations_is_one_controller_event(async_broker):
    """The topics watch is one-shot, as ZooKeeper's: 200 topics auto-created by one Metadata
    request fire it once, and the controller reads the children once for all of them."""
    client = await RawClient.connect(async_broker.port)
    names = [f"burst-{i}" for i in range(200)]
    response = await client.request(METADATA, 9, {
        "topics": [{"name": n} for n in names], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    assert {t.error_code for t in response.topics} == {ErrorCode.LEADER_NOT_AVAILABLE}
    controller = async_broker.controller
    cache = async_broker.metadata_cache  # the event's last step: UpdateMetadata with leaders
    await until(lambda: all(cache.has_leaders(n) for n in names))
    assert controller.events_handled["topic_change"] == 1
    await client.close()
