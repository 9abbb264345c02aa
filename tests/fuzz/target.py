"""A real one-broker cluster for the fuzzer, and the oracles every input is judged by.

In process, an input goes through the path a connection takes (FrameDecoder, then
`Connection.handle_frame`: header, KafkaApis handler, encoded response) on a real `Connection`
over a socket pair; over TCP, it is sent to the broker's listener. The cluster runs on a manual
clock, so a request parked until its timeout (a Fetch's max wait, a JoinGroup's rebalance) is
answered by moving the clock, never by waiting: an input that takes over a second of wall clock
is a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import os
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from broker.handlers import HANDLERS
from broker.network.connection import CloseConnection, Connection
from broker.server.cluster import Cluster
from broker.server.kafka_server import KafkaServer
from protocol import (
    ProtocolDecodeError,
    decode_request_header,
    decode_response,
    decode_response_header,
    encode_frame,
    encode_request,
    encode_request_header,
    response_header_version,
)
from protocol.framing import FrameDecoder
from tests.harness import cluster_config
from timer import ManualClock

HANG_S = 1.0
STUCK_S = 30.0  # the watchdog's limit, for a loop that never comes back to the driver
MAX_CLOCK_STEP_MS = 2**36  # past any int32 timeout (2^31 ms is 25 days)
API_VERSIONS, METADATA, CREATE_TOPICS = 18, 3, 19
# What the connection answers with a closed socket (connection.py's serve()); anything else a
# request raises is a bug in the broker.
CLOSES_CONNECTION = (ProtocolDecodeError, CloseConnection)
TOPICS = {"fuzz-a": {}, "fuzz-b": {}, "fuzz-compact": {"cleanup.policy": "compact"}}


class FuzzFailure(AssertionError):
    """An input broke an oracle; the message holds the input's bytes (hex) to replay it.
    `kind`: "crash" (an exception escaped, an answer that does not decode), "hang" (neither an
    answer nor a close within HANG_S) or "slow" (answered, but after HANG_S)."""

    def __init__(self, what: str, data: bytes, kind: str = "crash") -> None:
        super().__init__(f"{kind}: {what}\ninput ({len(data)} bytes): {data[:4096].hex()}")
        self.data = data
        self.kind = kind


@dataclass(slots=True)
class Outcome:
    answered: int  # responses that decoded
    closed: bool  # the connection would be (or was) closed
    seconds: float  # wall clock, less the time the OS kept the event loop off the CPU
    wall_seconds: float


class Stopwatch:
    """Wall-clock time of one input, and that time less the event loop thread's run-queue wait
    (Linux schedstat): on a shared 2-core host a runnable process can wait seconds for a CPU,
    which says nothing about the broker. Without schedstat both readings are the wall clock."""

    __slots__ = ("started", "queued")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.queued = run_queue_wait()

    @property
    def wall(self) -> float:
        return time.perf_counter() - self.started

    @property
    def seconds(self) -> float:
        return self.wall - (run_queue_wait() - self.queued)


class Watchdog(threading.Thread):
    """The oracle for a request that never gives the loop back (an endless loop in a decoder):
    the driver shares the loop with the broker, so a thread watches; after STUCK_S on one input
    it prints the input and every thread's stack and ends the process."""

    def __init__(self) -> None:
        super().__init__(name="fuzz-watchdog", daemon=True)
        self.current: tuple[float, bytes] | None = None
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.5):
            current = self.current
            if current is not None and time.perf_counter() - current[0] > STUCK_S:
                sys.stderr.write(f"\nFUZZ: the event loop is stuck on an input for over {STUCK_S} s"
                                 f"\ninput ({len(current[1])} bytes): {current[1][:4096].hex()}\n")
                faulthandler.dump_traceback(all_threads=True)
                os._exit(3)


def run_queue_wait() -> float:
    """Seconds this thread has spent runnable but waiting for a CPU."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def awaiting(task: asyncio.Task) -> str:
    """Where a stuck request waits: its chain of awaits, innermost last."""
    steps, coro = [], task.get_coro()
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        frame = coro.cr_frame
        steps.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None)
    if coro is not None:
        steps.append(f"  on {coro!r}")
    return "\n".join(steps)


def check_response(request_frame: bytes, response_payload: bytes, data: bytes) -> None:
    """The response decodes with the project's decoder for the request's API and version, and
    carries the request's correlation id."""
    header, _ = decode_request_header(request_frame)
    key, version = header.api_key, header.api_version
    handler = HANDLERS[key]
    if key == API_VERSIONS and not handler.min_version <= version <= handler.max_version:
        version = 0  # the v0-layout UNSUPPORTED_VERSION reply
    try:
        correlation_id, offset = decode_response_header(
            response_payload, response_header_version(key, version))
        decode_response(key, version, response_payload, offset)
    except ProtocolDecodeError as e:
        raise FuzzFailure(f"{handler.name} v{version} response does not decode: {e}", data) from e
    if correlation_id != header.correlation_id:
        raise FuzzFailure(f"correlation id {correlation_id} != {header.correlation_id}", data)


class FuzzBroker:
    """One broker on a manual clock with the fuzzer's topics; `run` and `run_tcp` judge inputs."""

    def __init__(self, data_dir: Path) -> None:
        self.clock = ManualClock(1_000_000)
        self.cluster = Cluster(cluster_config(data_dir), 1, clock=self.clock)
        self.broker: KafkaServer | None = None
        self.connection: Connection | None = None
        self._pair: tuple[socket.socket, asyncio.StreamWriter] | None = None
        self.max_frame = 0
        self.watchdog = Watchdog()

    async def start(self) -> FuzzBroker:
        self.watchdog.start()
        await self.cluster.start()
        broker = self.broker = self.cluster.brokers[0]
        await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
        self.max_frame = broker.config["socket.request.max.bytes"]
        ours, theirs = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=theirs)
        self._pair = (ours, writer)
        self.connection = Connection(broker.services, self.cluster.context.faults, reader, writer)
        frame = encode_frame(encode_request_header(CREATE_TOPICS, 7, 1, "fuzz") + encode_request(
            CREATE_TOPICS, 7, {"topics": [
                {"name": name, "num_partitions": 2, "replication_factor": 1,
                 "configs": [{"name": k, "value": v} for k, v in configs.items()]}
                for name, configs in TOPICS.items()]}))
        await self.run(frame)
        return self

    async def stop(self) -> None:
        self.watchdog.stopped.set()
        if self._pair:
            ours, writer = self._pair
            writer.close()
            ours.close()
        await self.cluster.stop()

    async def _settle(self, task: asyncio.Task, watch: Stopwatch, data: bytes) -> None:
        """Let the request finish: first a few turns of the loop (the controller's queue, the
        store's watches), then the broker's clock moved on in growing steps (a parked request
        meets its timeout), then wall-clock waits (work in a thread) up to the hang limit."""
        for _ in range(8):
            if task.done():
                return
            await asyncio.sleep(0)
        step_ms = 100
        while not task.done():
            if step_ms <= MAX_CLOCK_STEP_MS:
                self.clock.advance(step_ms)
                step_ms *= 16
                for _ in range(4):
                    if task.done():
                        return
                    await asyncio.sleep(0)
            else:
                await asyncio.wait({task}, timeout=0.001)
            if not task.done() and watch.seconds > HANG_S:
                where = awaiting(task)
                task.cancel()
                raise FuzzFailure(f"no answer and no close within {HANG_S} s, waiting at\n{where}",
                                  data, "hang")

    async def run(self, data: bytes) -> Outcome:
        """Judge one input in process: its frames handled as the connection handles them."""
        self.watchdog.current = (time.perf_counter(), data)
        try:
            return await self._run(data)
        finally:
            self.watchdog.current = None

    async def run_tcp(self, data: bytes) -> Outcome:
        """Judge one input over a real socket: the input, then end-of-stream; within a second the
        broker answers what it can and closes, and every answer decodes."""
        self.watchdog.current = (time.perf_counter(), data)
        try:
            return await self._run_tcp(data)
        finally:
            self.watchdog.current = None

    async def _run(self, data: bytes) -> Outcome:
        assert self.connection is not None
        watch = Stopwatch()
        answered, closed = 0, False
        try:
            frames = FrameDecoder(self.max_frame).feed(data)
        except CLOSES_CONNECTION:
            frames, closed = [], True
        for frame in frames:
            task = asyncio.ensure_future(self.connection.handle_frame(frame))
            await self._settle(task, watch, data)
            try:
                response = task.result()
            except CLOSES_CONNECTION:
                closed = True
                break
            except Exception as e:
                raise FuzzFailure(f"{type(e).__name__} escaped the request: {e}", data) from e
            if response is not None:
                check_response(frame, response[4:], data)
                answered += 1
        return self._judged(watch, Outcome(answered, closed, watch.seconds, watch.wall), data)

    @staticmethod
    def _judged(watch: Stopwatch, outcome: Outcome, data: bytes) -> Outcome:
        if outcome.seconds > HANG_S:
            raise FuzzFailure(f"took {outcome.seconds:.2f} s ({outcome.wall_seconds:.2f} s of "
                              f"wall clock)", data, "slow")
        return outcome

    async def _run_tcp(self, data: bytes) -> Outcome:
        assert self.broker is not None
        sent: list[bytes] = []
        with contextlib.suppress(ProtocolDecodeError):
            sent = FrameDecoder(2**31).feed(data)
        reader, writer = await asyncio.open_connection("127.0.0.1", self.broker.port)
        # The time starts once connected: the kernel completes the handshake without the broker's
        # loop, and a SYN it drops is sent again only a second later (TCP's initial RTO). CI saw
        # one input "slow" at 1.01 s whose broker side closes at once when run alone.
        watch = Stopwatch()
        answered = 0
        try:
            writer.write(data)
            writer.write_eof()
            reading = asyncio.ensure_future(self._read_all(reader))
            await self._settle(reading, watch, data)
            for payload in reading.result():
                answered += self._match(sent, payload, data)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # a reset is a closed connection too
        finally:
            writer.close()
        return self._judged(watch, Outcome(answered, True, watch.seconds, watch.wall), data)

    @staticmethod
    async def _read_all(reader: asyncio.StreamReader) -> list[bytes]:
        payloads = []
        while head := await reader.read(4):
            head += await reader.readexactly(4 - len(head))
            (size,) = struct.unpack(">i", head)
            payloads.append(await reader.readexactly(size))
        return payloads

    @staticmethod
    def _match(sent: list[bytes], payload: bytes, data: bytes) -> int:
        """Responses come in request order; requests without one (acks=0) are skipped."""
        (correlation_id,) = struct.unpack_from(">i", payload)
        while sent:
            frame = sent.pop(0)
            try:
                header, _ = decode_request_header(frame)
            except ProtocolDecodeError:
                break
            if header.correlation_id == correlation_id and header.api_key in HANDLERS:
                check_response(frame, payload, data)
                return 1
        raise FuzzFailure(f"a response (correlation id {correlation_id}) to no request", data)

    async def served_promptly(self) -> float:
        """A Metadata round trip on a new TCP connection, within a second: the broker's other
        connections are still served. Returns its seconds (less run-queue waits)."""
        assert self.broker is not None
        watch = Stopwatch()

        async def metadata() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.broker.port)
            try:
                writer.write(encode_frame(encode_request_header(METADATA, 12, 7, "probe")
                                          + encode_request(METADATA, 12, {"topics": None})))
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                payload = await reader.readexactly(size)
                correlation_id, offset = decode_response_header(
                    payload, response_header_version(METADATA, 12))
                assert correlation_id == 7
                decode_response(METADATA, 12, payload, offset)
            finally:
                writer.close()

        await asyncio.wait_for(metadata(), 10 * HANG_S)  # the wall-clock backstop
        seconds = watch.seconds
        assert seconds < HANG_S, f"the probe took {seconds:.2f} s ({watch.wall:.2f} s of wall clock)"
        return seconds
