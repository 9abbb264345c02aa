"""BrokerClient: one connection to another broker's listener, one request at a time, in the Kafka
protocol (the same framing and codec the broker serves with). Any failure closes the connection;
the next request opens a new one. On a secured inter-broker listener the connection is TLS, and
SASL logs in (SaslHandshake v1, SaslAuthenticate) before the first request."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.security.plain import plain_token
from broker.security.sasl import PLAIN, SaslAuthenticationFailed
from broker.security.scram import ScramClient
from protocol import decode_response, encode_request
from protocol.api import response_header_version
from protocol.errors import ProtocolDecodeError
from protocol.framing import encode_frame
from protocol.headers import decode_response_header, encode_request_header

if TYPE_CHECKING:
    from broker.security.client_security import ClientSecurity

MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # above any fetch.max.bytes a broker builds
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class BrokerUnreachable(ConnectionError):
    """The other broker could not be reached, or the connection broke mid-request."""


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class BrokerClient:
    def __init__(self, host: str, port: int, client_id: str, *,
                 connect_timeout_s: float = 5.0, security: ClientSecurity | None = None,
                 connect: Callable[[], Awaitable[Streams]] | None = None) -> None:
        self.host, self.port = host, port
        self.security = security
        self._connect = connect  # instead of TCP (the simulation's in-memory network)
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0
        self._session_ends: float | None = None  # loop time; set when SASL sessions expire
        self._lock = asyncio.Lock()

    async def request(self, api_key: int, version: int, body: dict, *,
                      timeout_s: float = 30.0) -> Any:
        """Send one request and return the decoded response body."""
        async with self._lock:
            try:
                async with asyncio.timeout(timeout_s):  # (wait_for would make a task each time)
                    return await self._exchange(api_key, version, body)
            except asyncio.CancelledError:
                self.close()  # the answer may still come: this connection can no longer be read
                raise
            except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, ProtocolDecodeError,
                    SaslAuthenticationFailed) as exc:
                self.close()
                raise BrokerUnreachable(f"broker {self.host}:{self.port}: "
                                        f"{exc or type(exc).__name__}") from None

    async def _exchange(self, api_key: int, version: int, body: dict) -> Any:
        if self._reader is not None and self._reader.at_eof():
            self.close()  # the broker closed it meanwhile (connections.max.idle.ms): a new one
        if self._session_ends is not None and asyncio.get_running_loop().time() >= self._session_ends:
            self.close()  # KIP-368: log in again on a new connection before the session ends
        if self._writer is None:
            context = self.security.ssl_context if self.security is not None else None
            self._reader, self._writer = await asyncio.wait_for(
                self._connect() if self._connect is not None else
                asyncio.open_connection(self.host, self.port, ssl=context,
                                        server_hostname=self.host if context else None),
                self.connect_timeout_s)
            if self.security is not None and self.security.mechanism:
                await self._authenticate(self.security)
        return await self._round_trip(api_key, version, body)

    async def _authenticate(self, security: ClientSecurity) -> None:
        handshake = await self._round_trip(SASL_HANDSHAKE, 1, {"mechanism": security.mechanism})
        if handshake.error_code != 0:
            raise SaslAuthenticationFailed(f"SaslHandshake {security.mechanism}: error "
                                           f"{handshake.error_code}")

        async def step(token: bytes) -> bytes:
            answer = await self._round_trip(SASL_AUTHENTICATE, 1, {"auth_bytes": token})
            if answer.error_code != 0:
                raise SaslAuthenticationFailed(f"SaslAuthenticate as {security.username}: "
                                               f"{answer.error_message}")
            if answer.session_lifetime_ms > 0:  # reconnect at 90% of it, well before the end
                self._session_ends = (asyncio.get_running_loop().time()
                                      + answer.session_lifetime_ms * 0.9 / 1000)
            return bytes(answer.auth_bytes)

        if security.mechanism == PLAIN:
            await step(plain_token(security.username, security.password))
            return
        scram = ScramClient(security.mechanism, security.username, security.password)
        server_first = await step(scram.first_message())
        final = await asyncio.to_thread(scram.final_message, server_first)  # PBKDF2
        scram.check_server_final(await step(final))

    async def _round_trip(self, api_key: int, version: int, body: dict) -> Any:
        assert self._reader is not None and self._writer is not None
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
        self._session_ends = None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
