"""Kafka's SaslServerAuthenticator: the requests a connection to a SASL listener may send before it
is authenticated — ApiVersions, then SaslHandshake (17) choosing a mechanism, then the mechanism's
tokens in SaslAuthenticate (36) requests (handshake v1) or raw and length-prefixed (handshake v0).

Anything else closes the connection; a failed login is answered, and the connection closed, only
after `connection.failed.authentication.delay.ms` (a timer: the broker goes on serving others).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

from broker.control.faults import error_response
from broker.handlers import HANDLERS
from broker.handlers.api_versions import API_KEY as API_VERSIONS_KEY
from broker.logs import get_logger
from broker.network.close_connection import CloseConnection
from broker.security.sasl import PLAIN, SaslAuthenticationFailed, SaslServer
from protocol import (
    decode_request,
    decode_request_header,
    encode_frame,
    encode_response,
    encode_response_header,
    response_header_version,
)
from protocol.errors import ErrorCode, ProtocolDecodeError
from protocol.headers import RequestHeader

if TYPE_CHECKING:
    from broker.security.listener_security import ListenerSecurity

log = get_logger("kafka_sim.sasl")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
LINGER_S = 1.0  # after a failure's answer, how long the client gets to close first


class SaslChannel(Protocol):
    """What the authenticator needs of its connection (broker/network/connection.py)."""

    peer: str
    principal: str
    reader: asyncio.StreamReader
    mechanism: str
    writer: asyncio.StreamWriter

    def handle_frame(self, frame: bytes) -> Awaitable[bytes | None]: ...

    def authenticated(self, principal: str, mechanism: str, session_ms: int) -> None: ...


class SaslServerAuthenticator:
    def __init__(self, connection: SaslChannel, security: ListenerSecurity, *,
                 reauthenticating: bool = False) -> None:
        self.connection = connection
        self.security = security
        self.reauthenticating = reauthenticating
        self.state = "handshake"  # -> "authenticate" (v1 headers) or "raw" (v0 tokens)
        self.server: SaslServer | None = None
        self.handshake_version = 0

    async def on_frame(self, frame: bytes) -> bytes | None:
        if self.state == "raw":
            return await self._raw_token(frame)
        header, offset = decode_request_header(frame)
        if self.state == "handshake":
            if header.api_key == API_VERSIONS_KEY and not self.reauthenticating:
                return await self.connection.handle_frame(frame)
            if header.api_key == SASL_AUTHENTICATE:
                return await self._fail(header, {
                    "error_code": ErrorCode.ILLEGAL_SASL_STATE,
                    "error_message": "SaslAuthenticate request received before SaslHandshake",
                    "auth_bytes": b""}, "SaslAuthenticate before SaslHandshake", delay=False)
            if header.api_key != SASL_HANDSHAKE:
                raise CloseConnection(f"unexpected request (API key {header.api_key}) during SASL "
                                      "handshake: the client may not be configured for SASL")
            return await self._handshake(header, self._decode(header, frame, offset))
        if header.api_key != SASL_AUTHENTICATE:
            return await self._fail(header, self._illegal_state(header, frame, offset),
                                    f"unexpected request (API key {header.api_key}) during SASL "
                                    "authentication")
        return await self._authenticate(header, self._decode(header, frame, offset))

    def _illegal_state(self, header: RequestHeader, frame: bytes, offset: int) -> dict | None:
        """Kafka answers a request other than SaslAuthenticate after the handshake with that
        request's own error response, ILLEGAL_SASL_STATE throughout (when it can read it)."""
        handler = HANDLERS.get(header.api_key)
        if handler is None or not handler.min_version <= header.api_version <= handler.max_version:
            return None
        try:
            request = decode_request(header.api_key, header.api_version, frame, offset,
                                     explain=False)
            return error_response(header.api_key, header.api_version, request,
                                  ErrorCode.ILLEGAL_SASL_STATE)
        except (ProtocolDecodeError, ValueError):
            return None

    @staticmethod
    def _decode(header: RequestHeader, frame: bytes, offset: int):
        handler = HANDLERS[header.api_key]
        if not handler.min_version <= header.api_version <= handler.max_version:
            raise CloseConnection(f"unsupported version {header.api_version} of {handler.name}")
        return decode_request(header.api_key, header.api_version, frame, offset, explain=False)

    async def _handshake(self, header: RequestHeader, request) -> bytes | None:
        mechanism = request.mechanism
        previous = self.connection.mechanism if self.reauthenticating else None
        if mechanism not in self.security.mechanisms or (previous and mechanism != previous):
            return await self._fail(header, {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                             "mechanisms": self.security.mechanisms},
                                    f"unsupported SASL mechanism {mechanism!r}")
        if self.reauthenticating and header.api_version < 1:
            return await self._fail(header, {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                                             "mechanisms": self.security.mechanisms},
                                    "re-authentication needs SaslHandshake v1")
        self.server = self.security.sasl_server(mechanism)
        self.handshake_version = header.api_version
        self.state = "authenticate" if header.api_version >= 1 else "raw"
        return _response(header, {"error_code": ErrorCode.NONE,
                                  "mechanisms": self.security.mechanisms})

    async def _authenticate(self, header: RequestHeader, request) -> bytes | None:
        try:
            challenge = await self._evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationFailed as exc:
            return await self._fail(header, {
                "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                "error_message": self._client_message(exc), "auth_bytes": b""},
                f"SASL authentication failed: {exc}")
        lifetime_ms = self._complete() if self.server is not None and self.server.complete else 0
        return _response(header, {"error_code": ErrorCode.NONE, "error_message": None,
                                  "auth_bytes": challenge, "session_lifetime_ms": lifetime_ms})

    def _client_message(self, exc: SaslAuthenticationFailed) -> str:
        """PLAIN's reason goes to the client; SCRAM's does not (it could tell which users exist),
        as in Kafka."""
        assert self.server is not None
        if self.server.mechanism == PLAIN:
            return str(exc)
        what = "re-authentication" if self.reauthenticating else "authentication"
        return (f"Authentication failed during {what} due to invalid credentials with SASL "
                f"mechanism {self.server.mechanism}")

    async def _raw_token(self, token: bytes) -> bytes:
        try:
            challenge = await self._evaluate(token)
        except SaslAuthenticationFailed as exc:
            # v0 has no error response: the delayed close is all the client learns
            return await self._fail(None, None, f"SASL authentication failed: {exc}")
        if self.server is not None and self.server.complete:
            self._complete()
        return encode_frame(challenge)

    async def _evaluate(self, token: bytes) -> bytes:
        assert self.server is not None
        user = self.server.user_to_look_up(token)
        if user is not None and self.security.credentials is not None:
            await self.security.credentials.refresh(user)
        challenge = self.server.evaluate(token)
        if self.server.complete and self.reauthenticating:
            principal = f"User:{self.server.username}"
            if principal != self.connection.principal:
                raise SaslAuthenticationFailed(
                    f"Cannot change principals during re-authentication from "
                    f"{self.connection.principal}: {principal}")
        return challenge

    def _complete(self) -> int:
        """Authenticated: the connection serves every API from its next request on. Returns the
        session lifetime (KIP-368), 0 when sessions do not expire."""
        assert self.server is not None
        self.connection.authenticated(f"User:{self.server.username}", self.server.mechanism,
                                      self.security.max_reauth_ms if self.handshake_version else 0)
        log.debug("authenticated", peer=self.connection.peer, principal=self.connection.principal,
                  mechanism=self.server.mechanism, reauthentication=self.reauthenticating)
        return self.security.max_reauth_ms if self.handshake_version else 0

    async def _fail(self, header: RequestHeader | None, body: dict | None, reason: str, *,
                    delay: bool = True) -> None:
        """Answer (when there is an answer) after the failed-authentication delay, then close."""
        if delay:
            await self.security.failed_authentication_delay()
        if header is not None and body is not None:
            self.connection.writer.write(_response(header, body))
            await self.connection.writer.drain()
            # Closing at once can lose the answer: a client that reads the answer and the end of
            # the stream in one go may drop both (kafka-python does). The client closes once it
            # has read the error; wait for that a moment, discarding anything it sends.
            with contextlib.suppress(TimeoutError, ConnectionError):
                async with asyncio.timeout(LINGER_S):
                    while await self.connection.reader.read(4096):
                        pass
        raise CloseConnection(reason)


def _response(header: RequestHeader, body: dict) -> bytes:
    return encode_frame(
        encode_response_header(header.correlation_id,
                               response_header_version(header.api_key, header.api_version))
        + encode_response(header.api_key, header.api_version, body))
