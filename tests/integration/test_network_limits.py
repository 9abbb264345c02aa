"""Hostile connections on a real listener (the hardening issue's finding 6): each costs its own
connection at most, bounded in memory and time, and a fresh connection is still served within a
second."""

from __future__ import annotations

import asyncio
import socket

from protocol.framing import encode_frame
from protocol.headers import encode_request_header
from protocol.schema import Codec
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic, served_promptly

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


async def test_pipelining_client_that_never_reads_is_stopped_by_backpressure(async_broker):
    admin = await RawClient.connect(async_broker.port)
    await create_topic(admin, "wide", 100)  # a Metadata response of some 3 KB
    await admin.close()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the client reads nothing
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", async_broker.port))
    hostile = RawClient(*await asyncio.open_connection(sock=sock))
    request = encode_frame(encode_request_header(METADATA, 1, 1, "hostile")
                           + (-1).to_bytes(4, "big", signed=True))  # topics: null (all)
    hostile.writer.write(request * 5000)  # some 15 MB of responses, never read
    await until(lambda: connection_of(async_broker, hostile) is not None)
    connection = connection_of(async_broker, hostile)
    await until(lambda: connection.waiting_for_client)
    await served_promptly(async_broker.port)
    # Stopped: it holds at most the high-water mark plus one response, and one read of requests.
    assert connection.waiting_for_client
    assert connection.requests_handled < 5000
    assert connection.buffered_bytes < HIGH_WATER + READ_CHUNK + 64 * 1024
    hostile.writer.transport.abort()
    await until(lambda: connection_of(async_broker, hostile) is None)
