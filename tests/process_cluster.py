"""A multi-process cluster for tests: one `kafka-sim run -o zookeeper.connect=...` process per
broker against the test session's real ZooKeeper, on ephemeral loopback ports, each with its
control API; brokers can be killed (-9), stopped (SIGSTOP) and restarted on the same ports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from broker.server.zookeeper_runner import free_port

ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 60.0


def wait_until(condition: Callable[[], object], what: str, timeout_s: float = DEADLINE_S):
    """Poll another process's state (nothing to await across processes) until it holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = condition()
        except (OSError, ValueError, KeyError):
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# A broker whose first start lost its free ports to another process gets new ones this often.
PORT_RETRIES = 3
LOST_PORT = "lost its port"


class ProcessCluster:
    def __init__(self, zk_connect: str, root: Path, brokers: int = 3,
                 overrides: dict[str, str] | None = None, listener: str = "PLAINTEXT",
                 log_dirs: int = 1) -> None:
        self.zk_connect = zk_connect
        self.num_log_dirs = log_dirs
        self.listener = listener  # the name (and security protocol) of the brokers' one listener
        self.root = root
        self.ids = list(range(brokers))
        self.overrides = {"zookeeper.session.timeout.ms": "3000",
                          "controlled.shutdown.retry.backoff.ms": "200",
                          "default.replication.factor": str(min(3, brokers)),
                          "replica.lag.time.max.ms": "3000", **(overrides or {})}
        self.ports = {i: free_port() for i in self.ids}
        self.control_ports = {i: free_port() for i in self.ids}
        self.processes: dict[int, subprocess.Popen] = {}
        self._registered_once: set[int] = set()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[i]}" for i in self.ids)

    def command(self, broker_id: int) -> list[str]:
        args = [sys.executable, "-m", "broker.server.cli", "run",
                "--listeners", f"{self.listener}://127.0.0.1:{self.ports[broker_id]}",
                "--log-dirs", ",".join(str(d) for d in self.log_dirs(broker_id)),
                "-o", f"zookeeper.connect={self.zk_connect}", "-o", f"broker.id={broker_id}",
                "-o", f"control.listener=127.0.0.1:{self.control_ports[broker_id]}",
                "-o", "log.level=info"]
        for name, value in self.overrides.items():
            args += ["-o", f"{name}={value}"]
        return args

    def log_dirs(self, broker_id: int) -> list[Path]:
        """broker-<id>/, then broker-<id>-dir<k>/ for each further log dir."""
        first = self.root / f"broker-{broker_id}"
        return [first, *(first.with_name(f"{first.name}-dir{k}")
                         for k in range(1, self.num_log_dirs))]

    def start(self, broker_id: int | None = None) -> None:
        for i in self.ids if broker_id is None else [broker_id]:
            self._launch(i)
        for i in self.ids if broker_id is None else [broker_id]:
            for _ in range(PORT_RETRIES):
                if wait_until(lambda i=i: self._lost_its_port(i) or self.registered(i),
                              f"broker {i} to register") != LOST_PORT:
                    break
                # Its free ports were taken between their choice and its first bind: it never
                # registered, so no client knows them yet, and it takes new ones.
                self.ports[i], self.control_ports[i] = free_port(), free_port()
                self._launch(i)
            else:
                raise AssertionError(f"broker {i} found its ports taken {PORT_RETRIES} times")
            self._registered_once.add(i)

    def _launch(self, broker_id: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        log = (self.root / f"broker-{broker_id}.log").open("ab")
        self.processes[broker_id] = subprocess.Popen(self.command(broker_id), cwd=ROOT, stdout=log,
                                                     stderr=subprocess.STDOUT)

    def _lost_its_port(self, broker_id: int) -> str | None:
        """LOST_PORT when a broker that never registered exited at start because a port of its was
        in use (kafka-sim's one-line `cannot start` error as its log's last line)."""
        if broker_id in self._registered_once or self.processes[broker_id].poll() is None:
            return None
        lines = (self.root / f"broker-{broker_id}.log").read_text(errors="replace").splitlines()
        return LOST_PORT if lines and "address already in use" in lines[-1] else None

    def control(self, broker_id: int, path: str, method: str = "GET", body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.control_ports[broker_id]}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"} if method != "GET" else {})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def wait_until_all_registered(self) -> None:
        """Until every broker sees every broker alive (each one's metadata has them all)."""
        for i in self.ids:
            wait_until(lambda i=i: len([b for b in self.brokers(i) if b["alive"]])
                       == len(self.ids), f"broker {i} to see {len(self.ids)} brokers")

    def brokers(self, via: int) -> list[dict]:
        answer = self.control(via, "/brokers")
        return answer["brokers"] if isinstance(answer, dict) else answer

    def registered(self, broker_id: int, via: int | None = None) -> bool:
        via = broker_id if via is None else via
        return any(b["id"] == broker_id and b["alive"] for b in self.brokers(via))

    def partitions(self, topic: str, via: int) -> list[dict]:
        answer = self.control(via, f"/partitions?topic={topic}")
        return answer["partitions"] if isinstance(answer, dict) else answer

    def wait_exit(self, broker_id: int, timeout_s: float) -> None:
        """Wait for a broker process to exit; one that does not is asked for its threads' stacks
        (SIGQUIT: faulthandler) and the assertion shows the end of its log."""
        process = self.processes[broker_id]
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGQUIT)
            time.sleep(2)
            tail = (self.root / f"broker-{broker_id}.log").read_text(errors="replace")[-6000:]
            raise AssertionError(f"broker {broker_id} did not exit in {timeout_s} s; its log "
                                 f"ends:\n{tail}") from None

    def alive(self) -> list[int]:
        return [i for i, p in self.processes.items() if p.poll() is None]

    def kill(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        os.kill(self.processes[broker_id].pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.processes[broker_id].wait(30)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
