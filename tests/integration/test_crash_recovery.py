"""`kill -9` of a broker process: after a restart on the same data directory every acknowledged
record is there, offsets go on from where they were, and a torn tail is cut off; every topic a
CreateTopics answer acknowledged is in the metadata store's files."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from broker.server.cluster import STORE_DIR
from storage.metadata_image import JOURNAL, load_image
from tests.harness import BrokerThread, read_all

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(data_dir: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.server.cli", "run", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
         "--log-dirs", str(data_dir), "--brokers", "1", "-o", "log.level=warning",
         "-o", "control.listener="],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # another process: its open port is all we can observe
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            assert proc.poll() is None, "broker exited"
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError("broker did not start")


@pytest.mark.slow
def test_kill_9_keeps_acknowledged_records_and_cuts_a_torn_tail(tmp_path):
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    proc = start(tmp_path, port)
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
        for i in range(100):
            producer.send("crash", value=b"before-%d" % i).get(timeout=10)
        producer.close()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)

    # A torn write: half a batch at the end of the active segment, as a crash mid-append leaves.
    [segment] = sorted((tmp_path / "broker-0" / "crash-0").glob("*.log"))
    with open(segment, "ab") as f:
        f.write(segment.read_bytes()[:40])

    proc = start(tmp_path, port)
    try:
        assert read_all(bootstrap, "crash") == [b"before-%d" % i for i in range(100)]
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
        assert producer.send("crash", value=b"after").get(timeout=10).offset == 100
        producer.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0  # graceful shutdown exits 0


def stored_topics(data_dir: Path) -> dict[str, dict]:
    """The topics and their configs as the metadata store's files hold them (read, not repaired)."""
    image = load_image(data_dir / STORE_DIR, repair=False).image
    return {path.removeprefix("/config/topics/"): json.loads(node.data)["config"]
            for path, node in image.nodes.items() if path.startswith("/config/topics/")}


@pytest.mark.slow
def test_kill_9_right_after_create_topics_keeps_the_topics(tmp_path):
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    proc = start(tmp_path, port)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(f"durable-{i}", 2, 1, topic_configs={"retention.ms": "1234"})
                             for i in range(20)])
    finally:  # the moment the answer is in: nothing gets a chance to write more
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    admin.close()
    expected = {f"durable-{i}": {"retention.ms": "1234"} for i in range(20)}
    assert stored_topics(tmp_path) == expected

    proc = start(tmp_path, port)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        assert set(expected) <= set(admin.list_topics())
        admin.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_create_topics_is_answered_only_once_the_store_is_fsynced(tmp_path, monkeypatch):
    """The journal's fsync is held back (a slow disk): the answer waits for it, the loop does not."""
    broker = BrokerThread(tmp_path).start()
    released = threading.Event()
    real_fsync = os.fsync

    def slow_disk(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(f"{STORE_DIR}/{JOURNAL}"):
            released.wait(30)
        real_fsync(fd)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    monkeypatch.setattr(os, "fsync", slow_disk)
    try:
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(admin.create_topics, [NewTopic("held", 1, 1)])
            with pytest.raises(FutureTimeout):
                answer.result(timeout=1)
            # Meanwhile the broker serves: the topic is visible (in memory), Metadata answers on
            # another connection (on the admin's own, it would wait behind the CreateTopics, as a
            # Kafka channel is muted while a request is in flight).
            assert "held" in broker.call(lambda: set(broker.cluster.brokers[0].metadata_cache
                                                     .snapshot.topics))
            other = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=5000)
            try:
                assert "held" in other.list_topics()
            finally:
                other.close()
            released.set()
            answer.result(timeout=10)
        assert "held" in stored_topics(tmp_path)  # on disk while the store is still open
    finally:
        released.set()
        admin.close()
        broker.stop()
