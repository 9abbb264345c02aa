"""`kill -9` of a broker process: after a restart on the same data directory every acknowledged
record is there, offsets go on from where they were, and a torn tail is cut off."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.harness import read_all

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
