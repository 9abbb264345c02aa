"""One client connection: frames in, requests handled strictly one after another, responses out.

The connection is the only place that closes a socket on bad input: an unreadable frame, an
unknown API key or an unsupported version (other than ApiVersions, which gets the v0-layout
UNSUPPORTED_VERSION reply) closes this connection alone; every other error is a code in the reply.
On a SASL listener its frames go to the SASL authenticator until the client has logged in; a TLS
client certificate names the principal from the start.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING

from broker.control.faults import Fault, FaultAction, error_response
from broker.handlers import HANDLERS, RequestContext
from broker.handlers.api_versions import api_versions_fallback
from broker.logs import get_logger
from broker.network.close_connection import CloseConnection
from broker.network.handler_time import HandlerTime
from broker.network.idle_sweeper import IdleSweeper
from broker.network.memory_pool import RequestMemoryPool
from broker.network.request_metrics import RequestMetrics
from broker.network.sasl_server_authenticator import SASL_HANDSHAKE, SaslServerAuthenticator
from broker.security.principal import ANONYMOUS, ssl_principal
from protocol import (
    decode_request,
    decode_request_header,
    encode_frame,
    encode_response,
    encode_response_header,
    response_header_version,
)
from protocol.api import API_VERSIONS_KEY, encode_response_parts
from protocol.errors import ProtocolDecodeError
from protocol.file_region import FileRegion
from protocol.framing import FrameDecoder, encode_frame_parts
from protocol.headers import RequestHeader
from protocol.types import TooManyElements

if TYPE_CHECKING:
    from broker.control.faults import FaultInjector
    from broker.handlers.services import BrokerServices
    from broker.security.listener_security import ListenerSecurity

log = get_logger("kafka_sim.connection")
READ_CHUNK = 256 * 1024
# A frame this large takes its size from the broker's request memory pool before its body is read
# (smaller ones are bounded by READ_CHUNK per connection). Its decode on the loop stops after
# LOOP_DECODE_ELEMENTS array elements (~5 us of CPU each: ~10 ms) and starts again in a worker
# thread, where its response is encoded too: a body of many small elements would hold the loop
# (and its answer as many), while one of few large ones (a Produce's batches) costs little, and
# a thread hop per request would cost it more than its decode.
LARGE_FRAME_BYTES = 64 * 1024
LOOP_DECODE_ELEMENTS = 2_000
# Array elements one request may hold (the partitions of a Fetch, the topics of a Metadata...):
# each costs hundreds of bytes once decoded, so 96 MB of 16-byte entries would be gigabytes.
# A body with more is refused before its elements are made, and the connection closed.
MAX_REQUEST_ELEMENTS = 500_000
PRODUCE_KEY, FETCH_KEY, METADATA_KEY = 0, 1, 3
# Never throttled by the request quota: the inter-broker (cluster action) APIs, answered without
# a throttle as Kafka's sendResponseExemptThrottle (LeaderAndIsr, StopReplica, UpdateMetadata,
# ControlledShutdown, WriteTxnMarkers)
REQUEST_QUOTA_EXEMPT = frozenset({4, 5, 6, 7, 27})


__all__ = ["CloseConnection", "Connection"]


class Connection:
    def __init__(
        self, services: BrokerServices, faults: FaultInjector,
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: str = "PLAINTEXT",
        security: ListenerSecurity | None = None, metrics: RequestMetrics | None = None,
        memory_pool: RequestMemoryPool | None = None, idle_sweeper: IdleSweeper | None = None,
    ) -> None:
        self.services = services
        self.memory_pool = memory_pool or RequestMemoryPool(0)
        self._reserved = 0  # bytes of the frame being received or handled, from the pool
        self.metrics = metrics
        self.faults = faults
        self.listener = listener
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.client_host = str(peer[0])
        self.peer = f"{peer[0]}:{peer[1]}"
        self.decoder = FrameDecoder(services.config["socket.request.max.bytes"])
        self.idle_s = services.config["connections.max.idle.ms"] / 1000
        self.idle_sweeper = idle_sweeper or IdleSweeper(self.idle_s)
        self.handling = False  # between a read's first completed frame and its last answer
        self.requests_handled = 0
        self.principal = ANONYMOUS  # until TLS or SASL says who the client is
        self.mechanism = ""  # the SASL mechanism the client logged in with
        self.session_expires: int | None = None  # KIP-368: when the SASL session ends (clock ms)
        self.logins = 0  # successful SASL logins on this connection (more: re-authentications)
        self.waiting_for_client = False  # a response waits for the client to read
        self.throttle: tuple[str, int] | None = None  # (quota, ms) the last response earned
        self.security = security
        # Fetch responses send record bytes from the segment files with sendfile(2) on this
        # socket (Kafka's zero-copy transfer), but through TLS, which must encrypt them.
        sock = writer.get_extra_info("socket")
        self._sendfile_fd = (sock.fileno() if sock is not None and hasattr(os, "sendfile")
                             and writer.get_extra_info("sslcontext") is None else -1)
        # What a frame goes to: the request path, or (SASL, until logged in) the authenticator.
        # One bound method, so a PLAINTEXT connection pays nothing per request for SASL.
        self.on_frame = self.handle_frame
        if security is not None:
            if security.ssl_context is not None:
                self.principal = ssl_principal(writer.get_extra_info("peercert"))
            if security.sasl:
                self._begin_authentication()

    def _begin_authentication(self, *, reauthenticating: bool = False) -> SaslServerAuthenticator:
        assert self.security is not None
        authenticator = SaslServerAuthenticator(self, self.security,
                                                reauthenticating=reauthenticating)
        self.on_frame = authenticator.on_frame
        # Kafka's sasl.server.max.receive.size: an unauthenticated client sends small frames only
        self.decoder.max_frame_bytes = min(self.security.max_receive_size,
                                           self.services.config["socket.request.max.bytes"])
        return authenticator

    @property
    def _before_login(self) -> bool:
        """A SASL client's ApiVersions before it logged in: Kafka's authenticator answers it,
        outside the request quotas."""
        return self.security is not None and self.security.sasl and self.logins == 0

    def authenticated(self, principal: str, mechanism: str, session_ms: int) -> None:
        """The SASL authenticator's success: every API is served from the next request on."""
        self.principal, self.mechanism = principal, mechanism
        self.logins += 1
        self.decoder.max_frame_bytes = self.services.config["socket.request.max.bytes"]
        if session_ms > 0:
            assert self.security is not None
            self.session_expires = self.security.now_ms() + session_ms
            self.on_frame = self._handle_frame_in_session
        else:
            self.session_expires = None
            self.on_frame = self.handle_frame

    async def _handle_frame_in_session(self, frame: bytes) -> bytes | list | None:
        """KIP-368: a SaslHandshake starts a re-authentication; once the session has expired,
        any other request closes the connection."""
        if len(frame) >= 2 and int.from_bytes(frame[:2], "big", signed=True) == SASL_HANDSHAKE:
            return await self._begin_authentication(reauthenticating=True).on_frame(frame)
        assert self.security is not None
        if self.session_expires is not None and self.security.now_ms() > self.session_expires:
            raise CloseConnection("SASL session expired (connections.max.reauth.ms) and the client "
                                  "did not re-authenticate")
        return await self.handle_frame(frame)

    async def serve(self) -> None:
        """Kafka mutes a channel while one of its requests is in flight: here one request is
        decoded, handled and its response written before the next, and the socket is read only
        when every complete frame of the last read is answered. While the write buffer toward the client
        is above asyncio's high-water mark (64 KiB) the connection waits for the client to read;
        meanwhile nothing is read from it, so a client that pipelines and never reads stops
        itself (TCP backpressure) instead of filling the broker's memory.

        Kafka's `connections.max.idle.ms` bounds the waits on the client: a connection that
        completes no request for that long (silent, or trickling a frame it never finishes) is
        closed, and so is one that takes nothing of a pending response for that long. The time a
        request spends in the broker (a parked Fetch, a JoinGroup) does not count. The broker's
        IdleSweeper keeps the deadlines; the connection tells it when a read's frames are
        answered."""
        sweeper = self.idle_sweeper
        sweeper.active(self)
        try:
            while True:
                data = await self.reader.read(READ_CHUNK)
                if not data:
                    return
                # The frames one read completed (at most READ_CHUNK of them), one at a time; no
                # read until they are answered. (Cutting them in one pass keeps the buffer from
                # being shifted once per frame, which halved the 10 KB produce rate.)
                for frame in self.decoder.feed(data):
                    self.handling = True
                    if len(frame) >= LARGE_FRAME_BYTES and not self._reserved:
                        await self._reserve(len(frame))
                    try:
                        response = await self.on_frame(frame)
                    finally:
                        self._release()
                    self.requests_handled += 1
                    if response is not None:
                        if type(response) is list:
                            self._write_parts(response)
                        else:
                            self.writer.write(response)
                        if self.writer.transport.get_write_buffer_size():
                            await self._drain()  # (the socket took it all: nothing to wait for)
                    if self.throttle is not None:
                        await self._mute(*self.throttle)
                if self.handling:  # a request completed: the idle time starts again
                    self.handling = False
                    sweeper.active(self)
                incoming = self.decoder.incomplete_size
                if incoming >= LARGE_FRAME_BYTES and not self._reserved:
                    await self._reserve(incoming)  # its body is read once the pool has room
        except (ProtocolDecodeError, CloseConnection) as exc:
            log.warning("closing connection", peer=self.peer, reason=str(exc))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must cost this connection, never the broker
            log.exception("request failed; closing connection", peer=self.peer)
        finally:
            sweeper.forget(self)
            self._release()
            self.writer.close()

    def close_idle(self) -> None:
        """The sweeper's close: no request completed for connections.max.idle.ms (the read
        waiting on the socket then ends, and serve with it)."""
        log.warning("closing connection", peer=self.peer, reason=(
            f"no complete request for connections.max.idle.ms={self.idle_s * 1000:.0f} "
            f"({self.decoder.buffered} bytes of a frame buffered)"))
        self.writer.transport.close()

    def _write_parts(self, parts: list[bytes | FileRegion]) -> None:
        """A response with record bytes left in their files: each region goes from its file to
        the socket with sendfile(2) while the socket takes it and nothing is queued before it;
        what it does not take is read and queued as bytes (as a TLS connection sends it all)."""
        transport = self.writer.transport
        for part in parts:
            if type(part) is not FileRegion:
                transport.write(part)
                continue
            try:
                sent = 0
                if self._sendfile_fd >= 0 and not transport.get_write_buffer_size():
                    sent = self._sendfile(part)
                if sent < part.size:
                    data = part.read(sent)
                    if len(data) != part.size - sent:
                        raise CloseConnection(f"a log segment was truncated under a fetch "
                                              f"response being sent ({part})")
                    transport.write(data)
                if self.metrics is not None:
                    self.metrics.bytes_sent_from_files += sent
                    self.metrics.bytes_copied_from_files += part.size - sent
            finally:
                part.close()

    def _sendfile(self, region: FileRegion) -> int:
        sent = 0
        while sent < region.size:
            try:
                n = os.sendfile(self._sendfile_fd, region.fd, region.position + sent,
                                region.size - sent)
            except (BlockingIOError, InterruptedError):
                break  # the socket's buffer is full: the rest is queued as bytes
            except ConnectionError:
                raise
            except OSError:  # sendfile refused (an unusual file system): copy from now on
                self._sendfile_fd = -1
                break
            if n == 0:
                raise CloseConnection(f"a log segment was truncated under a fetch response "
                                      f"being sent ({region})")
            sent += n
        return sent

    async def _reserve(self, size: int) -> None:
        await self.memory_pool.reserve(size)
        self._reserved = size

    def _release(self) -> None:
        if self._reserved:
            self.memory_pool.release(self._reserved)
            self._reserved = 0

    async def _mute(self, quota_type: str, throttle_ms: int) -> None:
        """KIP-219: the response is out; no further request is read from this client until the
        throttle time is over (a delay on the broker's timing wheel)."""
        self.throttle = None
        quotas = self.services.quotas
        if quotas is not None:
            await quotas.throttled.mute(quota_type, throttle_ms)

    async def _drain(self) -> None:
        self.waiting_for_client = True
        try:
            async with asyncio.timeout(self.idle_s):
                await self.writer.drain()
        except TimeoutError:
            raise CloseConnection(
                f"the client read no response for connections.max.idle.ms="
                f"{self.idle_s * 1000:.0f}") from None
        finally:
            self.waiting_for_client = False

    @property
    def buffered_bytes(self) -> int:
        """What this connection holds for its client: bytes of unhandled frames (at most one
        incomplete frame and one read) and the responses not yet taken by the socket."""
        return self.decoder.buffered + self.writer.transport.get_write_buffer_size()

    async def _handle(self, handler, ctx: RequestContext, request, fault: Fault | None):
        """Run the handler, unless an injected fault answers or disconnects instead."""
        header = ctx.header
        if fault is not None:
            if fault.action is FaultAction.DISCONNECT:
                raise CloseConnection(f"fault {fault.id}: disconnect")
            if fault.action is FaultAction.DELAY:
                await asyncio.sleep(fault.delay_ms / 1000)
            elif fault.action is FaultAction.ERROR:
                if header.api_key == PRODUCE_KEY and request.acks == 0:
                    raise CloseConnection(f"fault {fault.id}: error on acks=0 closes, as Kafka")
                return self._fault_response(header, request, fault.error_code)
        return await handler.handle(ctx, request)

    def _fault_response(self, header: RequestHeader, request, code: int) -> dict:
        response = error_response(header.api_key, header.api_version, request, code)
        if header.api_key == METADATA_KEY:
            cache = self.services.metadata_cache
            response.update(
                brokers=[{"node_id": b, "host": h, "port": p}
                         for b, (h, p) in cache.brokers_for(self.listener).items()],
                cluster_id=self.services.cluster_id,
                controller_id=cache.controller_id,
            )
        return response

    async def handle_frame(self, frame: bytes | memoryview) -> bytes | list | None:
        started = time.perf_counter()
        header, body_offset = decode_request_header(frame)
        handler = HANDLERS.get(header.api_key)
        if handler is None:
            raise CloseConnection(f"unknown API key {header.api_key}")
        version = header.api_version
        if not handler.min_version <= version <= handler.max_version:
            if header.api_key != API_VERSIONS_KEY:
                raise CloseConnection(
                    f"unsupported version {version} of {handler.name} "
                    f"(supported {handler.min_version}-{handler.max_version})"
                )
            body = encode_response(API_VERSIONS_KEY, 0, api_versions_fallback())
            return encode_frame(encode_response_header(header.correlation_id, 0) + body)
        many_elements = False
        try:
            # A large frame is decoded here while it holds few elements (a Produce's big record
            # batches); past LOOP_DECODE_ELEMENTS the decode starts again in a worker thread.
            request = decode_request(
                header.api_key, version, frame, body_offset, explain=False,
                max_elements=LOOP_DECODE_ELEMENTS if len(frame) >= LARGE_FRAME_BYTES
                else MAX_REQUEST_ELEMENTS)
        except ProtocolDecodeError as exc:
            if len(frame) < LARGE_FRAME_BYTES or not isinstance(exc.__cause__, TooManyElements):
                raise
            many_elements = True
            request = await asyncio.to_thread(
                decode_request, header.api_key, version, frame, body_offset, explain=False,
                max_elements=MAX_REQUEST_ELEMENTS)
        fault = self.faults.match(
            self.services.broker_id, header.api_key, request,
            also_touches=(lambda: _session_partitions(self.services, request))
            if header.api_key == FETCH_KEY else None)
        ctx = RequestContext(header, self.services, self.client_host, self.listener,
                             self.principal, request_size=len(frame),
                             large_response=many_elements,
                             zero_copy=self._sendfile_fd >= 0)
        quotas = self.services.quotas
        if (quotas is not None and quotas.enabled("request")
                and header.api_key not in REQUEST_QUOTA_EXEMPT and not self._before_login):
            # request_percentage: the broker's time on the request, recorded after it unless
            # the handler did (Kafka's sendResponseMaybeThrottle)
            meter = HandlerTime()
            ctx.handler_time_ns = meter.elapsed_ns
            response = await meter.run(self._handle(handler, ctx, request, fault))
            if not ctx.request_quota_recorded:
                ctx.throttle("request", quotas.request.record_nanos(
                    ctx.quota_user, ctx.client_id, meter.elapsed_ns()))
        else:
            response = await self._handle(handler, ctx, request, fault)
        if ctx.throttle_ms > 0:
            self.throttle = (ctx.throttle_quota, ctx.throttle_ms)
            if response is not None:
                response["throttle_time_ms"] = ctx.throttle_ms
        if fault is not None and fault.action is FaultAction.DROP_RESPONSE:
            raise CloseConnection(f"fault {fault.id}: processed, response dropped")
        latency_ms = (time.perf_counter() - started) * 1000
        if self.metrics is not None:
            self.metrics.record(handler.name, latency_ms)
            if ctx.metric_name:
                self.metrics.record(ctx.metric_name, latency_ms)
        log.debug(
            "request",
            api=handler.name,
            version=version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
            latency_ms=round(latency_ms, 3),
        )
        if response is None:  # acks=0
            return None
        head = encode_response_header(header.correlation_id,
                                      response_header_version(header.api_key, version))
        # A Fetch's records may be FileRegions: its response is cut around them
        encode = (encode_response_parts if ctx.zero_copy and header.api_key == FETCH_KEY
                  else encode_response)
        if ctx.large_response:
            body = await asyncio.to_thread(encode, header.api_key, version, response)
        else:
            body = encode(header.api_key, version, response)
        if type(body) is list:
            return encode_frame_parts(head, body)
        return encode_frame(head + body)


def _session_partitions(services: BrokerServices, request) -> list[tuple[str, int]]:
    """The Fetch handler's session_partitions (its module loaded by the handler table)."""
    return HANDLERS[FETCH_KEY].handler_module().session_partitions(services, request)
