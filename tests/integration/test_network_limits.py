"""Hostile connections on a real listener (the hardening issue's finding 6): each costs its own
connection at most, bounded in memory and time, and a fresh connection is still served within a
second."""

from __future__ import annotations

import asyncio
import socket

import pytest

from broker.interbroker.broker_client import BrokerClient
from protocol.framing import encode_frame
from protocol.headers import encode_request_header
from protocol.records import encode_batch
from protocol.schema import Codec
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic, served_promptly
from tests.integration.test_protocol_edges import FETCH, PRODUCE, produce_body

METADATA = 3
HIGH_WATER = 64 * 1024  # asyncio's default write buffer high-water mark
READ_CHUNK = 256 * 1024  # broker/network/connection.py


async def until(condition, timeout: float = 5.0) -> None:
    """Poll a condition that nothing can be awaited for (a connection's state), bounded."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.005)
    await asyncio.wait_for(poll(), timeout)


def connection_of(broker, client: RawClient):
    host, port = client.writer.get_extra_info("sockname")[:2]
    found = [c for c in broker.connections() if c.peer == f"{host}:{port}"]
    return found[0] if found else None


async def test_unreadable_frame_is_parsed_once_and_closes_only_its_connection(
    async_broker, monkeypatch
):
    parses: list[str] = []
    fast, slow = Codec.parse, Codec.parse_interpreted
    monkeypatch.setattr(Codec, "parse", lambda self, *a: parses.append("compiled") or fast(self, *a))
    monkeypatch.setattr(Codec, "parse_interpreted",
                        lambda self, *a: parses.append("interpreted") or slow(self, *a))
    bystander = await RawClient.connect(async_broker.port)
    hostile = await RawClient.connect(async_broker.port)
    # Metadata v1: a topics array of 1000 names, but the frame ends after the count.
    header = encode_request_header(METADATA, 1, 7, "hostile")
    await hostile.send_raw(encode_frame(header + (1000).to_bytes(4, "big")))
    assert await asyncio.wait_for(hostile.is_closed_by_peer(), 1.0)
    assert parses == ["compiled"]
    await served_promptly(async_broker.port)
    response = await asyncio.wait_for(bystander.request(METADATA, 1, {"topics": None}), 1.0)
    assert [b.node_id for b in response.brokers] == [0]
    await bystander.close()
    await hostile.close()


async def pipeline_and_never_read(broker, requests: int = 5000):
    """A client that sends `requests` Metadata requests at once and reads nothing; returns it
    and the broker's connection for it."""
    admin = await RawClient.connect(broker.port)
    await create_topic(admin, "wide", 100)  # a Metadata response of some 3 KB
    await admin.close()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", broker.port))
    hostile = RawClient(*await asyncio.open_connection(sock=sock))
    request = encode_frame(encode_request_header(METADATA, 1, 1, "hostile")
                           + (-1).to_bytes(4, "big", signed=True))  # topics: null (all)
    hostile.writer.write(request * requests)  # some 15 MB of responses, never read
    await until(lambda: connection_of(broker, hostile) is not None)
    return hostile, connection_of(broker, hostile)


async def test_pipelining_client_that_never_reads_is_stopped_by_backpressure(async_broker):
    hostile, connection = await pipeline_and_never_read(async_broker)
    await until(lambda: connection.waiting_for_client)
    await served_promptly(async_broker.port)
    # Stopped: it holds at most the high-water mark plus one response, and one read of requests.
    assert connection.waiting_for_client
    assert connection.requests_handled < 5000
    assert connection.buffered_bytes < HIGH_WATER + READ_CHUNK + 64 * 1024
    hostile.writer.transport.abort()
    await until(lambda: connection_of(async_broker, hostile) is None)


IDLE_200_MS = pytest.mark.broker_config({"connections.max.idle.ms": "200"})


@IDLE_200_MS
async def test_silent_connection_is_closed_after_connections_max_idle_ms(async_broker):
    silent = await RawClient.connect(async_broker.port)
    assert await asyncio.wait_for(silent.is_closed_by_peer(), 1.0)
    await served_promptly(async_broker.port)
    await silent.close()


@IDLE_200_MS
async def test_unfinished_100_mib_frame_is_dropped_after_the_idle_timeout(async_broker):
    stalled = await RawClient.connect(async_broker.port)
    await stalled.send_raw((100 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 1000)
    await until(lambda: (c := connection_of(async_broker, stalled)) is not None
                and c.decoder.buffered > 0)
    assert await asyncio.wait_for(stalled.is_closed_by_peer(), 1.0)
    await until(lambda: connection_of(async_broker, stalled) is None)
    await served_promptly(async_broker.port)
    await stalled.close()


@IDLE_200_MS
async def test_trickled_frame_is_dropped_at_the_deadline_of_its_connection(async_broker):
    """Bytes keep coming, but no request completes: the deadline is not pushed back."""
    trickler = await RawClient.connect(async_broker.port)

    async def trickle() -> None:
        await trickler.send_raw((1024 * 1024).to_bytes(4, "big"))
        while True:
            await asyncio.sleep(0.02)  # the hostile pace, not a wait for the broker
            await trickler.send_raw(b"\0")

    trickling = asyncio.create_task(trickle())
    try:
        assert await asyncio.wait_for(trickler.is_closed_by_peer(), 1.0)
        await served_promptly(async_broker.port)
    finally:
        trickling.cancel()
        await asyncio.gather(trickling, return_exceptions=True)
        await trickler.close()


@IDLE_200_MS
async def test_busy_connection_outlives_the_idle_timeout(async_broker):
    client = await RawClient.connect(async_broker.port)
    started = asyncio.get_running_loop().time()
    while asyncio.get_running_loop().time() - started < 0.6:  # three idle timeouts of requests
        await asyncio.wait_for(client.request(METADATA, 1, {"topics": None}), 1.0)
    assert connection_of(async_broker, client) is not None
    await client.close()


@IDLE_200_MS
async def test_time_a_request_spends_parked_in_the_broker_is_not_idle_time(async_broker):
    """A Fetch parked in the purgatory for three idle timeouts keeps its connection: the idle
    sweeper counts from the last answer, and closes the connection once it is silent after."""
    admin = await RawClient.connect(async_broker.port)
    await create_topic(admin, "parked")
    await admin.close()
    consumer = await RawClient.connect(async_broker.port)
    correlation_id = await consumer.send(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 3_600_000, "min_bytes": 1, "max_bytes": 1 << 20,
        "topics": [{"topic": "parked", "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    purgatory = async_broker.replica_manager.fetch_purgatory
    await until(lambda: purgatory.delayed == 1)
    await asyncio.sleep(0.6)  # the subject: three idle timeouts pass while it is parked
    assert connection_of(async_broker, consumer) is not None
    producer = await RawClient.connect(async_broker.port)
    await producer.request(PRODUCE, 9, produce_body({("parked", 0): encode_batch(
        [(None, b"v", [], 0)])}))
    await producer.close()
    response = await asyncio.wait_for(consumer.receive(FETCH, 12, correlation_id), 5)
    assert response.responses[0].partitions[0].error_code == 0
    assert await asyncio.wait_for(consumer.is_closed_by_peer(), 1.0)  # silent after its answer
    await consumer.close()


@IDLE_200_MS
async def test_client_that_never_reads_its_responses_is_closed_after_the_idle_timeout(async_broker):
    hostile, connection = await pipeline_and_never_read(async_broker)
    await until(lambda: connection.waiting_for_client)
    await until(lambda: connection_of(async_broker, hostile) is None, 1.0)
    assert connection.requests_handled < 5000
    await served_promptly(async_broker.port)
    hostile.writer.transport.abort()


async def round_trip(client: RawClient) -> None:
    response = await asyncio.wait_for(client.request(METADATA, 1, {"topics": None}), 1.0)
    assert [b.node_id for b in response.brokers] == [0]


async def check_limit(broker, allowed: int) -> None:
    """`allowed` connections from 127.0.0.1 are served; one more is closed at once while they
    still work; once one of them goes, a new one is served again."""
    clients = [await RawClient.connect(broker.port) for _ in range(allowed)]
    for client in clients:
        await round_trip(client)
    extra = await RawClient.connect(broker.port)
    assert await asyncio.wait_for(extra.is_closed_by_peer(), 1.0)
    await extra.close()
    for client in clients:
        await round_trip(client)
    await clients.pop().close()
    await until(lambda: broker.connection_quotas.total == allowed - 1)
    await served_promptly(broker.port)
    for client in clients:
        await client.close()


@pytest.mark.broker_config({"max.connections.per.ip": "2"})
async def test_max_connections_per_ip(async_broker):
    await check_limit(async_broker, 2)


@pytest.mark.broker_config({"max.connections.per.ip": "1",
                            "max.connections.per.ip.overrides": "127.0.0.1:3,[::1]:1"})
async def test_max_connections_per_ip_overrides(async_broker):
    await check_limit(async_broker, 3)


@pytest.mark.broker_config({"max.connections": "2"})
async def test_max_connections(async_broker):
    await check_limit(async_broker, 2)


@IDLE_200_MS
async def test_inter_broker_client_reconnects_after_an_idle_close(async_broker):
    client = BrokerClient("127.0.0.1", async_broker.port, "broker-1")
    response = await client.request(METADATA, 1, {"topics": None})
    assert [b.node_id for b in response.brokers] == [0]
    await until(lambda: async_broker.connection_quotas.total == 0, 1.0)  # closed as idle
    response = await asyncio.wait_for(client.request(METADATA, 1, {"topics": None}), 1.0)
    assert [b.node_id for b in response.brokers] == [0]
    client.close()
