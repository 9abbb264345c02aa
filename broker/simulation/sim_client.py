"""SimClient: the simulation's Kafka client connection, requests and responses over the simulated
network with the project's own codec, and a request timeout on simulated time."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from broker.simulation.sim_network import SimulatedNetwork
from protocol import decode_response, encode_request
from protocol.api import response_header_version
from protocol.framing import encode_frame
from protocol.headers import decode_response_header, encode_request_header

REQUEST_TIMEOUT_S = 5.0


class RequestFailed(Exception):
    """The connection broke or the request timed out: its outcome is unknown."""


class SimClient:
    """One connection from host `host` to a broker; requests are pipelined, answered in order."""

    def __init__(self, network: SimulatedNetwork, host: str, broker: str) -> None:
        self.network = network
        self.host = host
        self.broker = broker
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0
        self._waiting: dict[int, tuple[int, int, asyncio.Future]] = {}
        self._reading: asyncio.Task | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def request(self, api_key: int, version: int, body: dict[str, Any],
                      timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
        if self._writer is None:
            try:
                self._reader, self._writer = await self.network.connect(
                    self.host, self.broker, timeout_s)
            except (OSError, TimeoutError) as exc:
                raise RequestFailed(f"{self.broker}: {exc}") from exc
            self._reading = asyncio.ensure_future(self._read_responses(self._reader))
        self._correlation += 1
        self.network.requests += 1
        correlation = self._correlation
        future = asyncio.get_running_loop().create_future()
        self._waiting[correlation] = (api_key, version, future)
        header = encode_request_header(api_key, version, correlation, self.host)
        self._writer.write(encode_frame(header + encode_request(api_key, version, body)))
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            self.close()  # as a client does: a timed-out connection's later answers are not trusted
            raise RequestFailed(f"{self.broker}: request timed out") from None

    async def _read_responses(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                (length,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(length)
                (correlation,) = struct.unpack_from(">i", frame)
                api_key, version, future = self._waiting.pop(correlation)
                got, offset = decode_response_header(
                    frame, response_header_version(api_key, version))
                if not future.done():
                    future.set_result(decode_response(api_key, version, frame, offset))
        except (asyncio.IncompleteReadError, ConnectionError, KeyError):
            self._fail_waiting()

    def _fail_waiting(self) -> None:
        waiting, self._waiting = self._waiting, {}
        for _, _, future in waiting.values():
            if not future.done():
                future.set_exception(RequestFailed(f"{self.broker}: connection closed"))
        self._writer = None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._reading is not None:
            self._reading.cancel()
            self._reading = None
        self._fail_waiting()

    async def aclose(self) -> None:
        reading = self._reading
        self.close()
        if reading is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await reading
