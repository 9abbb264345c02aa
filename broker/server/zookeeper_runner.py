"""A local Apache ZooKeeper (Debian's `zookeeper` package, run standalone with Java) for a
multi-process cluster on one machine: `kafka-sim zookeeper`, `make cluster` and the tests use it.

It listens on loopback only; its data lives in a folder of the caller's.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # Debian's package; its manifest lists the deps
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = "apt-get install zookeeper (Debian's package; needs a Java runtime)"


class ZooKeeperUnavailable(RuntimeError):
    """ZooKeeper is not installed here, or did not start."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def is_installed() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


class ZooKeeperServer:
    """One standalone ZooKeeper process; `connect_string` is host:port once started."""

    def __init__(self, data_dir: Path, port: int = 0, host: str = "127.0.0.1",
                 tick_time_ms: int = 500) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        # Session timeouts may range from 2 to 20 ticks: 1 s to 10 s with the default tick.
        self.tick_time_ms = tick_time_ms
        self.process: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        if not is_installed():
            raise ZooKeeperUnavailable(f"ZooKeeper is not installed: {INSTALL_HINT}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
        )
        log = (self.data_dir / "zookeeper.log").open("ab")
        self.process = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", str(ZOOKEEPER_JAR), MAIN_CLASS, str(config)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # another process: its answer is all we can observe
            if self.process.poll() is not None:
                raise ZooKeeperUnavailable(
                    f"ZooKeeper exited with {self.process.returncode}; see {log.name}")
            if self._ruok():
                return
            time.sleep(0.05)
        self.stop()
        raise ZooKeeperUnavailable(f"ZooKeeper did not answer on {self.connect_string}")

    def _ruok(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
