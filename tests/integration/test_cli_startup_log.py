"""`kafka-sim run` logs its start-up once its brokers serve (structlog loads only then): every line
still comes out on stderr, as JSON off a terminal, in order and stamped with the time it happened."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from kafka.admin import KafkaAdminClient

ROOT = Path(__file__).resolve().parents[2]
KAFKA_SIM = Path(sys.executable).parent / "kafka-sim"  # the venv's console script, as a user runs it


def described_ports(bootstrap: str) -> list[int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return sorted(b["port"] for b in admin.describe_cluster()["brokers"])
    finally:
        admin.close()


def at(line: dict) -> float:
    assert line["timestamp"].endswith("Z"), line  # ISO, UTC: structlog's TimeStamper's format
    return datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")).timestamp()


async def test_kafka_sim_run_logs_its_start_up_once_serving_in_order_with_their_times(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        str(KAFKA_SIM), "run", "--listeners", "PLAINTEXT://127.0.0.1:0",
        "--log-dirs", str(tmp_path / "data"), "-o", "control.listener=", cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=asyncio.subprocess.PIPE)
    lines: list[dict] = []
    try:
        while not lines or lines[-1]["event"] != "cluster started":
            raw = await asyncio.wait_for(proc.stderr.readline(), 30)
            assert raw, f"kafka-sim run ended: {lines}"
            lines.append(json.loads(raw))
        bootstrap = lines[-1]["bootstrap"]
        ports = sorted(line["port"] for line in lines if line["event"] == "broker started")
        assert await asyncio.to_thread(described_ports, bootstrap) == ports and len(ports) == 3
    finally:
        proc.send_signal(signal.SIGINT)
        _, rest = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, rest.decode()
    lines += [json.loads(raw) for raw in rest.splitlines()]
    events = [line["event"] for line in lines]
    assert events[0] == "controller elected"
    started = [line["broker_id"] for line in lines if line["event"] == "broker started"]
    assert started == [0, 1, 2]
    assert events.index("cluster started") < events.index("broker stopped")
    assert [line["broker_id"] for line in lines if line["event"] == "broker stopped"] == [0, 1, 2]
    assert all(line["level"] == "info" for line in lines)
    stamps = [at(line) for line in lines]
    assert stamps == sorted(stamps)


def taken_port_after_a_free_one() -> socket.socket:
    while True:
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", taken.getsockname()[1] - 1))
            except OSError:
                taken.close()
                continue
        taken.listen()
        return taken


def test_a_failed_start_up_logs_what_it_held_before_the_error(tmp_path):
    """The second broker's port is taken: the first broker's lines still come out, then the error."""
    with taken_port_after_a_free_one() as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(KAFKA_SIM), "run", "--brokers", "2", "--listeners", f"PLAINTEXT://127.0.0.1:{port - 1}",
             "--log-dirs", str(tmp_path / "data"), "-o", "control.listener="],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
            timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    *logged, error = done.stderr.splitlines()
    assert error.startswith("kafka-sim: cannot start:") and str(port) in error
    events = [(line["event"], line.get("broker_id")) for line in map(json.loads, logged)]
    assert events[:2] == [("controller elected", 0), ("broker started", 0)]
    assert events[-1] == ("broker stopped", 0)
