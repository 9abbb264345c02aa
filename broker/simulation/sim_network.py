"""The simulation's network: in-memory connections between simulated clients and brokers, each
byte delivered after a latency, in order, and held while a partition cuts the link (as TCP keeps
retransmitting), so one seed gives one order of deliveries."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

# A connection's bytes take this long one way (loopback-like, and never zero, so replies interleave).
LATENCY_S = 0.0002

Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]


class _Endpoint(asyncio.Transport):
    """One end of an in-memory connection: `write` hands bytes to the network for the peer."""

    def __init__(self, network: SimulatedNetwork, link: tuple[str, str], peername: tuple[str, int]):
        super().__init__()
        self.network = network
        self.link = link  # (this end's host, the peer's host)
        self.peer: _Endpoint | None = None
        self.protocol: asyncio.Protocol | None = None
        self._peername = peername
        self._closing = False
        self._queue: deque[bytes | None] = deque()  # bytes on their way to the peer; None: FIN
        self._sending = False

    # -- asyncio.Transport --
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing and data:
            self._send(bytes(data))

    def writelines(self, list_of_data) -> None:
        self.write(b"".join(list_of_data))

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._send(None)
        protocol = self.protocol
        if protocol is not None:
            self.network.loop.call_soon(protocol.connection_lost, None)

    abort = close

    def is_closing(self) -> bool:
        return self._closing

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self._peername}.get(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol  # type: ignore[assignment]

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.protocol  # type: ignore[return-value]

    def pause_reading(self) -> None:
        pass  # the simulation's readers are bounded by the requests in flight

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return not self._closing

    def can_write_eof(self) -> bool:
        return False

    # -- delivery --
    def _send(self, data: bytes | None) -> None:
        self._queue.append(data)
        if not self._sending:
            self._sending = True
            self.network.loop.call_later(self.network.latency(self.link), self._deliver)

    def _deliver(self) -> None:
        """Hand the queued bytes to the peer, unless a partition holds them back."""
        if self.network.cut(*self.link):
            self.network.held.append(self)
            return
        self._sending = False
        peer = self.peer
        while self._queue:
            data = self._queue.popleft()
            if peer is None or peer.protocol is None or peer._lost:
                continue
            if data is None:
                peer._lost = True
                peer._closing = True
                peer.protocol.connection_lost(None)
            else:
                peer.protocol.data_received(data)

    _lost = False


class SimulatedNetwork:
    """Hosts by name (`client-3`, `broker-1`); `partition` cuts links between two sets of them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._listeners: dict[str, Accept] = {}
        self._cuts: set[frozenset[str]] = set()
        self._extra_delay: dict[str, float] = {}  # host -> added one-way latency
        self.held: list[_Endpoint] = []
        self.requests = 0  # sent by the simulated clients (their ClusterView counts them)
        self._ports = itertools.count(40000)

    def listen(self, host: str, accept: Accept) -> None:
        self._listeners[host] = accept

    def latency(self, link: tuple[str, str]) -> float:
        return LATENCY_S + self._extra_delay.get(link[0], 0.0) + self._extra_delay.get(link[1], 0.0)

    def cut(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self._cuts

    def partition(self, side_a: list[str], side_b: list[str]) -> None:
        self._cuts.update(frozenset((a, b)) for a in side_a for b in side_b if a != b)

    def delay(self, host: str, seconds: float) -> None:
        """Slow every link of `host` by `seconds` each way (0 ends it)."""
        if seconds:
            self._extra_delay[host] = seconds
        else:
            self._extra_delay.pop(host, None)

    def heal(self, side_a: list[str] | None = None, side_b: list[str] | None = None) -> None:
        """End the cuts between the two sides (every cut and delay without them); what the cuts
        held is delivered now, in order."""
        if side_a is None or side_b is None:
            self._cuts.clear()
            self._extra_delay.clear()
        else:
            self._cuts.difference_update(frozenset((a, b)) for a in side_a for b in side_b)
        held, self.held = self.held, []
        for endpoint in held:
            endpoint._deliver()  # one still cut goes back to `held`

    async def connect(self, client: str, server: str, timeout_s: float
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection from host `client` to host `server`. ConnectionRefusedError when nothing
        listens there; TimeoutError when a partition keeps the handshake from arriving."""
        deadline = self.loop.time() + timeout_s
        while self.cut(client, server):
            if self.loop.time() >= deadline:
                raise TimeoutError(f"connect to {server} timed out")
            await asyncio.sleep(min(0.05, deadline - self.loop.time()))
        await asyncio.sleep(self.latency((client, server)))
        accept = self._listeners.get(server)
        if accept is None:
            raise ConnectionRefusedError(f"{server} is not listening")
        port = next(self._ports)
        near = _Endpoint(self, (client, server), (server, 9092))
        far = _Endpoint(self, (server, client), (client, port))
        near.peer, far.peer = far, near
        client_side = self._stream(near)
        server_side = self._stream(far)
        self.loop.create_task(accept(*server_side))
        return client_side

    def _stream(self, transport: _Endpoint) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader = asyncio.StreamReader(loop=self.loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=self.loop)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        return reader, asyncio.StreamWriter(transport, protocol, reader, self.loop)
