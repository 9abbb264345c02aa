"""Can one client, or ZooKeeper, hold a broker's event loop hostage? Figures for issue-sized cases.

1. Hostile requests to one broker process (`kafka-sim run --brokers 1`), each on its own
   connection while a victim connection sends ApiVersions every 10 ms: a Metadata v1 naming a
   1,000-partition topic 6,000 times, a Metadata v9 auto-creating 8,000 topics, a ~96 MB Fetch
   naming one partition 6 million times. Printed per case: the victim's longest gap between two
   answers, how the request ended, and the broker's peak RSS meanwhile (VmHWM, reset per case).
2. 10 topics x 1,000 partitions, replication factor 3, created on the 3-broker embedded cluster:
   the time until every partition has a leader, and one Metadata for all of them.
3. Three broker processes over ZooKeeper frozen (SIGSTOP) for 25 s with Kafka's default session
   timeout: acks=all records produced to a partition with a whole ISR during the freeze (acked /
   sent), read back, and how long a broker sent SIGTERM during the freeze takes to exit.

Run: .venv/bin/python tests/bench/bench_loop_hostage.py [--quick] (smaller counts, shorter freeze)
Targets: victim gap < 100 ms, peak RSS < 500 MB, 10,000 partitions led in < 10 s and their
Metadata in < 200 ms, everything acked and read through the freeze, SIGTERM exit < 45 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without install

from protocol import encode_request  # noqa: E402
from protocol.framing import encode_frame  # noqa: E402
from protocol.headers import encode_request_header  # noqa: E402
from tests.bench.bench_startup import API_VERSIONS_V0, free_consecutive_ports  # noqa: E402
from tests.integration.raw_client import RawClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
METADATA, CREATE_TOPICS, FETCH = 3, 19, 1


# -- a broker process ---------------------------------------------------------------------------

def spawn(data: Path, brokers: int, base_port: int, *extra: str) -> subprocess.Popen:
    log = (data / "broker.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "broker.server.cli", "run", "--brokers", str(brokers),
         "--listeners", f"PLAINTEXT://127.0.0.1:{base_port}", "--log-dirs", str(data / "logs"),
         "-o", "control.listener=", *extra], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


async def wait_serving(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client = await RawClient.connect(port)
            await client.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def reset_peak_rss(pid: int) -> None:
    with open(f"/proc/{pid}/clear_refs", "w") as f:  # "5": reset the peak resident set size
        f.write("5")


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the victim ---------------------------------------------------------------------------------

class Victim:
    """ApiVersions every 10 ms on its own connection; the times of its answers."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answers: list[float] = []
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def run() -> None:
            while True:
                writer.write(API_VERSIONS_V0)
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                await reader.readexactly(size)
                self.answers.append(time.monotonic())
                await asyncio.sleep(0.01)

        self._task = asyncio.ensure_future(run())
        while len(self.answers) < 3:
            await asyncio.sleep(0.01)

    def longest_gap_ms(self, since: float, until: float) -> float:
        times = [since, *(t for t in self.answers if since < t <= until), until]
        return max(b - a for a, b in zip(times, times[1:], strict=False)) * 1000

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


# -- 1: hostile requests ------------------------------------------------------------------------

def fetch_naming_one_partition(times: int) -> bytes:
    """Fetch v4 (replica -1, one topic, `times` entries for partition 0), built by hand: encoding
    millions of entries through the codec would take minutes."""
    header = encode_request_header(FETCH, 4, 1, "hostile")
    body = struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0)
    body += struct.pack(">ih", 1, 4) + b"wide" + struct.pack(">i", times)
    body += struct.pack(">iqi", 0, 0, 1 << 20) * times
    return encode_frame(header + body)


def hostile_frame(case: str, quick: bool) -> bytes:
    times = 600_000 if quick else 6_000_000
    topics = 800 if quick else 8000
    if case == "metadata-dup":
        return encode_frame(encode_request_header(METADATA, 1, 1, "hostile") + encode_request(
            METADATA, 1, {"topics": [{"name": "wide"}] * 6000}))
    if case == "auto-create":
        return encode_frame(encode_request_header(METADATA, 9, 1, "hostile") + encode_request(
            METADATA, 9, {"topics": [{"name": f"auto-{i}"} for i in range(topics)],
                          "allow_auto_topic_creation": True,
                          "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": False}))
    return fetch_naming_one_partition(times)


async def send_hostile(port: int, case: str, quick: bool) -> None:
    """In a process of its own (see --send): building and writing ~100 MB would hold the
    victim's loop if it shared this one. Prints the outcome."""
    frame = hostile_frame(case, quick)
    client = await RawClient.connect(port)
    print(f"{len(frame) / 1e3:,.0f} KB", flush=True)
    try:
        await client.send_raw(frame)
        try:
            answer = await asyncio.wait_for(client.read_frame(), 600)
            print(f"answered, {len(answer) / 1e6:.1f} MB", flush=True)
        except (asyncio.IncompleteReadError, ConnectionError):
            print("connection closed by the broker", flush=True)
    finally:
        await client.close()


async def hostile(port: int, case: str, quick: bool) -> tuple[str, str, float, float]:
    """(frame size, outcome, sending started, answered) of one hostile request."""
    sender = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--send", case, str(port), *(["--quick"] if quick else []),
        stdout=asyncio.subprocess.PIPE, cwd=ROOT)
    size = (await sender.stdout.readline()).decode().strip()
    started = time.monotonic()
    outcome = (await sender.stdout.readline()).decode().strip()
    ended = time.monotonic()
    await sender.wait()
    return size, outcome, started, ended


async def hostile_requests(quick: bool) -> None:
    print("1. hostile requests to one broker process (victim: ApiVersions every 10 ms)")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        port = free_consecutive_ports(1)
        process = spawn(data, 1, port, "-o", "auto.create.topics.enable=true")
        victim = Victim(port)
        try:
            await wait_serving(port)
            admin = await RawClient.connect(port)
            await admin.request(CREATE_TOPICS, 7, {"topics": [
                {"name": "wide", "num_partitions": 1000, "replication_factor": 1,
                 "assignments": [], "configs": []}], "timeout_ms": 30_000,
                "validate_only": False})
            await admin.close()
            await victim.start()
            topics = 800 if quick else 8000
            times = 600_000 if quick else 6_000_000
            cases = [("metadata-dup", "Metadata v1: a 1,000-partition topic named 6,000 times"),
                     ("auto-create", f"Metadata v9: auto-creating {topics:,} topics"),
                     ("fetch-dup", f"Fetch: one partition named {times:,} times")]
            for case, name in cases:
                reset_peak_rss(process.pid)
                size, outcome, started, ended = await hostile(port, case, quick)
                await asyncio.sleep(0.05)
                print(f"   {name} ({size}): {outcome} in {ended - started:.2f} s; victim's "
                      f"longest gap {victim.longest_gap_ms(started, ended):.0f} ms; peak RSS "
                      f"{peak_rss_mb(process.pid):.0f} MB")
        finally:
            victim.stop()
            process.send_signal(signal.SIGINT)
            process.wait(60)


# -- 2: many partitions -------------------------------------------------------------------------

async def many_partitions(quick: bool) -> None:
    topics, partitions = (10, 100) if quick else (10, 1000)
    print(f"2. {topics} topics x {partitions:,} partitions, replication factor 3, on the embedded "
          "3-broker cluster")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        os.environ.get("BENCH_KEEP") and print(f"   data in {(data := Path(os.environ['BENCH_KEEP']))}")
        port = free_consecutive_ports(3)
        process = spawn(data, 3, port)
        victim = Victim(port + 1)
        try:
            for p in (port, port + 1, port + 2):
                await wait_serving(p)
            await victim.start()
            admin = await RawClient.connect(port)
            names = [f"many-{i}" for i in range(topics)]
            started = time.monotonic()
            response = await admin.request(CREATE_TOPICS, 7, {"topics": [
                {"name": n, "num_partitions": partitions, "replication_factor": 3,
                 "assignments": [], "configs": []} for n in names], "timeout_ms": 0,
                "validate_only": False})
            assert all(t.error_code == 0 for t in response.topics), response
            body = {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False}
            while True:  # (each Metadata of every partition is work for the broker: not too often)
                answer = await admin.request(METADATA, 9, body)
                if all(t.error_code == 0 and len(t.partitions) == partitions
                       and all(p.leader_id >= 0 for p in t.partitions) for t in answer.topics):
                    break
                await asyncio.sleep(0.5)
            led = time.monotonic()
            print(f"   every partition led after {led - started:.2f} s (victim's longest gap "
                  f"{victim.longest_gap_ms(started, led):.0f} ms)")
            started = time.monotonic()
            answer = await admin.request(METADATA, 1, {"topics": None})
            took = time.monotonic() - started
            count = sum(len(t.partitions) for t in answer.topics)
            print(f"   Metadata for all ({count:,} partitions): {took * 1000:.0f} ms")
            await admin.close()
        finally:
            victim.stop()
            process.send_signal(signal.SIGINT)
            process.wait(120)


# -- 3: ZooKeeper frozen ------------------------------------------------------------------------

def zookeeper_freeze(quick: bool) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    from broker.server.zookeeper_runner import ZooKeeperServer, is_installed
    from tests.cluster.client_producers import create_replicated_topic
    from tests.process_cluster import ProcessCluster, wait_until

    freeze_s = 8.0 if quick else 25.0
    print(f"3. three broker processes, ZooKeeper frozen {freeze_s:.0f} s "
          "(zookeeper.session.timeout.ms=18000)")
    if not is_installed():
        print("   skipped: Debian's zookeeper package is not installed")
        return
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        cluster = ProcessCluster(f"{zk.connect_string}/bench", Path(tmp) / "cluster",
                                 overrides={"zookeeper.session.timeout.ms": "18000",
                                            "controlled.shutdown.retry.backoff.ms": "5000"})
        try:
            cluster.start()
            create_replicated_topic(cluster.bootstrap, "frozen")
            wait_until(lambda: len(cluster.partitions("frozen", 0)[0]["isr"]) == 3, "whole ISR")
            leader = cluster.partitions("frozen", 0)[0]["leader"]
            acked: list[bytes] = []
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "message.timeout.ms": 120_000, "linger.ms": 0})
            os.kill(zk.process.pid, signal.SIGSTOP)
            frozen_at = time.monotonic()
            sent = 0
            stopping = next(i for i in cluster.ids if i != leader)
            term_at: float | None = None
            exit_s: float | None = None
            while time.monotonic() - frozen_at < freeze_s:
                producer.produce("frozen", b"%d" % sent, partition=0,
                                 on_delivery=lambda err, m: err is None and acked.append(m.value()))
                sent += 1
                producer.poll(0.1)
                if term_at is None and time.monotonic() - frozen_at > 2:
                    term_at = time.monotonic()
                    os.kill(cluster.processes[stopping].pid, signal.SIGTERM)
                if term_at is not None and exit_s is None \
                        and cluster.processes[stopping].poll() is not None:
                    exit_s = time.monotonic() - term_at
            acked_in_freeze = len(acked)
            os.kill(zk.process.pid, signal.SIGCONT)
            producer.flush(60)
            if exit_s is None and term_at is not None:
                cluster.processes[stopping].wait(120)
                exit_s = time.monotonic() - term_at
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bench"})
            consumer.assign([TopicPartition("frozen", 0, 0)])
            read = 0
            deadline = time.monotonic() + 30
            while read < len(acked) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    read += 1
            consumer.close()
            print(f"   acks=all records sent during the freeze: {sent}; acked during it "
                  f"{acked_in_freeze}, in all {len(acked)}; read back {read}; the broker sent "
                  f"SIGTERM 2 s into the freeze exited after {exit_s:.1f} s")
        finally:
            if zk.process is not None and zk.process.poll() is None:
                os.kill(zk.process.pid, signal.SIGCONT)
            cluster.stop()
            zk.stop()


async def main(quick: bool) -> None:
    # Case 2 first: this machine's ext4 has no journal, and such a file system skips inodes freed
    # in the last ~35 s when it allocates new ones (the kernel's recently_deleted); right after
    # case 1 removed its 8,000 topics' folders, 30,000 new ones took 3x as long (10 s -> 35 s).
    await many_partitions(quick)
    await hostile_requests(quick)
    await asyncio.to_thread(zookeeper_freeze, quick)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, a shorter freeze")
    parser.add_argument("--send", nargs=2, metavar=("CASE", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.send:
        asyncio.run(send_hostile(int(args.send[1]), args.send[0], args.quick))
    else:
        asyncio.run(main(args.quick))
