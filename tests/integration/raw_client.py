"""A minimal Kafka client over real TCP built on our own protocol package, for tests that need
to see exact responses (fetch wake-up, bad input, version fallback)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl as ssl_module
import struct

from protocol import decode_response, encode_request
from protocol.api import response_header_version
from protocol.framing import encode_frame
from protocol.headers import decode_response_header, encode_request_header


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.correlation_id = 0

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1", *,
                      ssl: ssl_module.SSLContext | None = None) -> RawClient:
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl)
        return cls(reader, writer)

    async def send(self, api_key: int, version: int, body: dict) -> int:
        self.correlation_id += 1
        header = encode_request_header(api_key, version, self.correlation_id, "raw-test")
        self.writer.write(encode_frame(header + encode_request(api_key, version, body)))
        await self.writer.drain()
        return self.correlation_id

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self) -> bytes:
        (length,) = struct.unpack(">i", await self.reader.readexactly(4))
        return await self.reader.readexactly(length)

    async def receive(self, api_key: int, version: int, correlation_id: int):
        frame = await self.read_frame()
        got, offset = decode_response_header(frame, response_header_version(api_key, version))
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return decode_response(api_key, version, frame, offset)

    async def request(self, api_key: int, version: int, body: dict):
        return await self.receive(api_key, version, await self.send(api_key, version, body))

    async def is_closed_by_peer(self) -> bool:
        """True when the broker has closed the connection (read returns EOF)."""
        try:
            return await self.reader.read(1) == b""
        except ConnectionError:
            return True

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()
