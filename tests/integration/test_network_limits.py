"""Hostile connections on a real listener (the hardening issue's finding 6): each costs its own
connection at most, bounded in memory and time, and a fresh connection is still served within a
second."""

from __future__ import annotations

import asyncio

from protocol.framing import encode_frame
from protocol.headers import encode_request_header
from protocol.schema import Codec
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import served_promptly

METADATA = 3


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
