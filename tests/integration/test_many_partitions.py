"""10,000 partitions in a broker process limited to 1024 open files (the usual soft ulimit): the
segments share a bounded cache of descriptors, so creating, producing to, recovering after kill -9
and fetching every partition works, and the process never holds more than the bound. The broker
keeps its metadata in ZooKeeper, whose writes are per node (the embedded store rewrites its whole
tree on every change, which 10,000 partition states make quadratic); ZooKeeper and the broker keep
their files in memory (tmpfs) when the machine has one, as this test is about descriptors, and
30,000 fsyncs of ZooKeeper's log on a disk would take minutes."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.server.zookeeper_runner import ZooKeeperServer
from protocol.errors import ErrorCode
from protocol.records import decode_batch, encode_batch, iter_batches
from tests.integration.raw_client import RawClient
from tests.integration.test_crash_recovery import free_port
from tests.integration.test_protocol_edges import produce_body

ROOT = Path(__file__).resolve().parents[2]
PRODUCE, FETCH, CREATE_TOPICS = 0, 1, 19
TOPICS, PARTITIONS = 10, 1000
OPEN_FILES_MAX = 256  # log.segment.open.files.max's default


@pytest.fixture
def memory_dir(tmp_path: Path) -> Iterator[Path]:
    shm = Path("/dev/shm")
    if not shm.is_dir():
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="many-partitions-") as folder:
        yield Path(folder)


@pytest.fixture
def zk_in_memory(memory_dir: Path) -> Iterator[str]:
    server = ZooKeeperServer(memory_dir / "zookeeper")
    server.start()
    yield server.connect_string
    server.stop()


def limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def start(data_dir: Path, port: int, zk_connect: str) -> subprocess.Popen:
    """The broker process; what it prints on stderr goes to `stderr.log` beside its data."""
    with open(data_dir.parent / "stderr.log", "ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "broker.server.cli", "run", "--listeners",
             f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", str(data_dir),
             "-o", f"zookeeper.connect={zk_connect}", "-o", "broker.id=0",
             "-o", "zookeeper.session.timeout.ms=3000", "-o", "controlled.shutdown.enable=false",
             "-o", "log.level=warning", "-o", "control.listener="],
            cwd=ROOT, preexec_fn=limit_open_files, stderr=stderr,
        )


def await_unregistered(zk_connect: str, broker_id: int, timeout_s: float = 60.0) -> None:
    """Until ZooKeeper has dropped the broker's registration (its session expired)."""
    from kazoo.client import KazooClient

    gone = threading.Event()
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=30)
    try:
        path = f"/brokers/ids/{broker_id}"
        if client.exists(path, watch=lambda _event: gone.set()) is None:
            return
        assert gone.wait(timeout_s), f"{path} still registered after {timeout_s} s"
    finally:
        client.stop()
        client.close()


def said(proc: subprocess.Popen) -> str:
    """The broker's stderr so far (a failing assertion shows why it exited)."""
    log_dirs = proc.args[proc.args.index("--log-dirs") + 1]
    return (Path(log_dirs).parent / "stderr.log").read_text(errors="replace")[-3000:]


async def connect(proc: subprocess.Popen, port: int) -> RawClient:
    deadline = time.monotonic() + 60
    while True:  # another process: its open port is all we can observe
        try:
            return await RawClient.connect(port)
        except OSError:
            assert proc.poll() is None, f"broker exited: {said(proc)}"
            assert time.monotonic() < deadline, "broker did not start"
            await asyncio.sleep(0.05)


def open_files(proc: subprocess.Popen) -> int:
    return len(os.listdir(f"/proc/{proc.pid}/fd"))


def value(topic: int, partition: int) -> bytes:
    return b"t%d-p%d" % (topic, partition)


async def produce_everywhere(client: RawClient) -> None:
    """One record per partition; partitions whose leader is not there yet are retried."""
    ts = int(time.time() * 1000)
    deadline = time.monotonic() + 60
    for t in range(TOPICS):
        todo = set(range(PARTITIONS))
        while todo:
            assert time.monotonic() < deadline, f"topic {t}: {len(todo)} partitions never led"
            response = await client.request(PRODUCE, 9, produce_body(
                {(f"many{t}", p): encode_batch([(None, value(t, p), [], ts)]) for p in todo}))
            for p in response.responses[0].partition_responses:
                assert p.error_code in (ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), p
                if p.error_code == ErrorCode.NONE:
                    assert p.base_offset == 0
                    todo.discard(p.index)
            if todo:
                await asyncio.sleep(0.05)


async def fetch_everything(client: RawClient) -> dict[tuple[int, int], list[bytes]]:
    """Every partition from offset 0; partitions not led again yet after the restart are retried."""
    found = {}
    deadline = time.monotonic() + 60
    for t in range(TOPICS):
        todo = set(range(PARTITIONS))
        while todo:
            assert time.monotonic() < deadline, f"topic {t}: {len(todo)} partitions never led"
            response = await client.request(FETCH, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24,
                "topics": [{"topic": f"many{t}", "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1024}
                    for p in sorted(todo)]}]})
            for p in response.responses[0].partitions:
                assert p.error_code in (ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), p
                if p.error_code == ErrorCode.NONE:
                    records = bytes(p.records or b"")
                    found[(t, p.partition_index)] = [r.value for pos, _ in iter_batches(records)
                                                     for r in decode_batch(records, pos)[1]]
                    todo.discard(p.partition_index)
            if todo:
                await asyncio.sleep(0.05)
    return found


@pytest.mark.slow
def test_ten_thousand_partitions_within_the_default_open_files_limit(
    memory_dir: Path, zk_in_memory: str
) -> None:
    async def scenario() -> None:
        port = free_port()
        timings = {}
        started = time.monotonic()
        proc = start(memory_dir / "broker-0", port, zk_in_memory)
        try:
            client = await connect(proc, port)
            for t in range(TOPICS):
                response = await client.request(CREATE_TOPICS, 7, {"timeout_ms": 60_000, "topics": [
                    {"name": f"many{t}", "num_partitions": PARTITIONS, "replication_factor": 1,
                     "configs": []}]})
                assert response.topics[0].error_code == ErrorCode.NONE, response
            timings["create"] = time.monotonic() - started
            await produce_everywhere(client)
            timings["produce"] = time.monotonic() - started
            assert open_files(proc) < OPEN_FILES_MAX + 64  # sockets and the rest: a few dozen
            await client.close()
        finally:
            proc.send_signal(signal.SIGKILL)  # a crash: the restart recovers every partition
            proc.wait(30)
        # The dead process's ZooKeeper session ends zookeeper.session.timeout.ms later; a broker
        # started before that refuses to ("already registered"), as Kafka's does.
        await asyncio.to_thread(await_unregistered, zk_in_memory, 0)

        proc = start(memory_dir / "broker-0", port, zk_in_memory)
        try:
            client = await connect(proc, port)
            timings["restart"] = time.monotonic() - started
            found = await fetch_everything(client)
            timings["fetch"] = time.monotonic() - started
            assert found == {(t, p): [value(t, p)] for t in range(TOPICS) for p in range(PARTITIONS)}
            assert open_files(proc) < OPEN_FILES_MAX + 64
            await client.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, said(proc)  # a graceful stop closes all 10,000 logs
        print("seconds since start:", {k: round(v, 1) for k, v in timings.items()})

    asyncio.run(scenario())
