"""`kafka-sim run` errors a user can meet say in one line what is wrong, never a traceback, and
exit 2 without leaving a broker behind."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "broker.server.cli", "run", "--brokers", "1",
         "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", str(cwd / "data"),
         "-o", "log.level=warning", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("kafka-sim:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_control_api_on_a_non_loopback_address_is_refused_before_starting(tmp_path):
    line = one_line(run("-o", "control.listener=0.0.0.0:0", cwd=tmp_path))
    assert "control.allow.remote=true" in line
    assert not (tmp_path / "data" / "broker-0").exists()  # no broker was started
    line = one_line(run("-o", "control.listener=0.0.0.0:0", "-o", "control.allow.remote=true",
                        cwd=tmp_path))
    assert "needs a control.token (-o control.token=SECRET" in line
    assert not (tmp_path / "data" / "broker-0").exists()


def test_a_port_in_use_is_named(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line(run("-o", f"control.listener=127.0.0.1:{port}", cwd=tmp_path))
    assert "cannot start" in line and str(port) in line


def test_a_bad_property_is_named(tmp_path):
    line = one_line(run("-o", "num.partitions=many", cwd=tmp_path))
    assert "num.partitions" in line


def test_a_broker_id_registered_by_another_session_is_named(zk_connect, tmp_path):
    """A second broker with the same id (or a restart right after kill -9, before ZooKeeper expired
    the dead process's session) cannot register: it says why and exits, as Kafka's broker does."""
    from tests.process_cluster import ProcessCluster

    cluster = ProcessCluster(zk_connect, tmp_path / "first", brokers=1)
    cluster.start()
    try:
        line = one_line(run("-o", f"zookeeper.connect={zk_connect}", "-o", "broker.id=0",
                            "-o", "control.listener=127.0.0.1:0", cwd=tmp_path))  # fmt: skip
    finally:
        cluster.stop()
    assert "broker 0 is already registered" in line and "zookeeper.session.timeout.ms" in line


def test_a_bad_log_level_is_named_before_starting(tmp_path):
    """structlog is set up once the brokers serve: the level is checked before they start."""
    line = one_line(run("-o", "log.level=loud", cwd=tmp_path))
    assert "log.level=loud" in line
    assert not (tmp_path / "data" / "broker-0").exists()
