"""BrokerClient: one connection to another broker's listener, one request at a time, in the Kafka
protocol (the same framing and codec the broker serves with). Any failure closes the connection;
the next request opens a new one."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from protocol import decode_response, encode_request
from protocol.api import response_header_version
from protocol.errors import ProtocolDecodeError
from protocol.framing import encode_frame
from protocol.headers import decode_response_header, encode_request_header

MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # above any fetch.max.bytes a broker builds


class BrokerUnreachable(ConnectionError):
    """The other broker could not be reached, or the connection broke mid-request."""


class BrokerClient:
    def __init__(self, host: str, port: int, client_id: str, *,
                 connect_timeout_s: float = 5.0) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0
        self._lock = asyncio.Lock()

    async def request(self, api_key: int, version: int, body: dict, *,
                      timeout_s: float = 30.0) -> Any:
        """Send one request and return the decoded response body."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._exchange(api_key, version, body), timeout_s)
            except asyncio.CancelledError:
                self.close()  # the answer may still come: this connection can no longer be read
                raise
            except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, ProtocolDecodeError) as exc:
                self.close()
                raise BrokerUnreachable(f"broker {self.host}:{self.port}: "
                                        f"{exc or type(exc).__name__}") from None

    async def _exchange(self, api_key: int, version: int, body: dict) -> Any:
        if self._reader is not None and self._reader.at_eof():
            self.close()  # the broker closed it meanwhile (connections.max.idle.ms): a new one
        if self._writer is None:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.connect_timeout_s)
        assert self._reader is not None
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        header = encode_request_header(api_key, version, self._correlation_id, self.client_id)
        self._writer.write(encode_frame(header + encode_request(api_key, version, body)))
        await self._writer.drain()
        (length,) = struct.unpack(">i", await self._reader.readexactly(4))
        if not 0 <= length <= MAX_RESPONSE_BYTES:
            raise ProtocolDecodeError(f"response size {length} out of bounds")
        frame = await self._reader.readexactly(length)
        got, offset = decode_response_header(frame, response_header_version(api_key, version))
        if got != self._correlation_id:
            raise ProtocolDecodeError(f"correlation id {got}, expected {self._correlation_id}")
        return decode_response(api_key, version, frame, offset)

    def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
