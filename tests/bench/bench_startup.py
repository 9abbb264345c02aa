"""Start-up benchmark: `kafka-sim run` (the embedded 3-broker cluster) as a fresh process, N times.

Each run spawns the CLI on free ports with an empty temporary data dir and measures the time from
spawn to the first ApiVersions answer on the bootstrap port, then to all three brokers answering,
and the process's idle RSS (VmRSS from /proc) a moment after its control API listens too. Prints median and p90, and
the CPU time the process had used at its first answer (which other load on the machine inflates
less than the wall-clock figures).
Bytecode is cached (in a temporary PYTHONPYCACHEPREFIX, filled by one untimed start), as for
anyone's second `make run`; `--cold` compiles the sources at every start instead.
`--runs N` (default 10). `--instructions` counts instead, under valgrind when it is installed,
the instructions `kafka-sim run` executes until its brokers serve: unlike times on a shared
machine it repeats to 0.1 %, so compare changes with it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKERS = 3
DEADLINE_S = 30.0
SETTLE_S = 1.0  # after the last broker answers, before RSS is read: start-up's garbage collected

# ApiVersions v0 (api key 18), correlation id 7, client id "bench": written by hand so that the
# bench measures the broker, not this process's imports.
_CLIENT_ID = b"bench"
_BODY = struct.pack(">hhih", 18, 0, 7, len(_CLIENT_ID)) + _CLIENT_ID
API_VERSIONS_V0 = struct.pack(">i", len(_BODY)) + _BODY


def free_consecutive_ports(count: int) -> int:
    """A base port such that base..base+count-1 are free now (the cluster counts up from it)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count >= 65536:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()


def api_versions_answers(port: int) -> bool:
    """One ApiVersions round trip: True when the broker answered it with error code 0."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as conn:
            conn.sendall(API_VERSIONS_V0)
            head = _read_exactly(conn, 10)  # size, correlation id, error code
    except OSError:
        return False
    if head is None:
        return False
    _, correlation_id, error_code = struct.unpack(">iih", head)
    return correlation_id == 7 and error_code == 0


def _read_exactly(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def cpu_ms(pid: int) -> float:
    """CPU time the process's threads have run so far, in ms (/proc/PID/task/*/schedstat:
    finer than the clock ticks of /proc/PID/stat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that just ended
            continue
    return total / 1e6


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def one_start(data_dir: Path, env: dict[str, str]) -> tuple[float, float, float, float]:
    """Seconds to the bootstrap broker's first answer, the CPU ms used by then, seconds to all
    brokers' answers, and idle RSS in MiB."""
    base = free_consecutive_ports(BROKERS + 1)  # the last one for the control API
    cmd = [sys.executable, "-c", "import sys; from broker.server.cli import main; sys.exit(main())",
           "run", "--brokers", str(BROKERS), "--listeners", f"PLAINTEXT://127.0.0.1:{base}",
           "--log-dirs", str(data_dir), "-o", f"control.listener=127.0.0.1:{base + BROKERS}"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        first = _wait_answering(proc, base, started)
        cpu = cpu_ms(proc.pid)
        for port in range(base + 1, base + BROKERS):
            _wait_answering(proc, port, started)
        every = time.perf_counter() - started
        _wait_listening(proc, base + BROKERS, started)  # the control API: aiohttp loaded too
        time.sleep(SETTLE_S)
        rss = rss_mib(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    if proc.returncode != 0:
        raise RuntimeError(f"kafka-sim run exited {proc.returncode}: {err.decode()[-2000:]}")
    return first, cpu, every, rss


def _wait_answering(proc: subprocess.Popen, port: int, started: float) -> float:
    while time.perf_counter() - started < DEADLINE_S:
        if proc.poll() is not None:
            raise RuntimeError(f"kafka-sim run exited {proc.returncode}: "
                               f"{proc.stderr.read().decode()[-2000:]}")
        if api_versions_answers(port):
            return time.perf_counter() - started
        time.sleep(0.001)  # a refused connect returns at once: do not spin the shared cores
    raise RuntimeError(f"port {port} not answering after {DEADLINE_S} s")


def _wait_listening(proc: subprocess.Popen, port: int, started: float) -> None:
    while time.perf_counter() - started < DEADLINE_S:
        if proc.poll() is not None:
            raise RuntimeError(f"kafka-sim run exited {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
            return
        except OSError:
            time.sleep(0.005)
    raise RuntimeError(f"port {port} not listening after {DEADLINE_S} s")


# `kafka-sim run` until the cluster's brokers serve, then an immediate exit (no shutdown counted).
_START_AND_EXIT = (
    "import os, sys\n"
    "from broker.server import cluster\n"
    "start = cluster.Cluster.start\n"
    "async def start_and_exit(self, *args, **kwargs):\n"
    "    await start(self, *args, **kwargs)\n"
    "    os._exit(0)\n"
    "cluster.Cluster.start = start_and_exit\n"
    "from broker.server.cli import main\n"
    "sys.exit(main())\n")


def start_instructions(env: dict[str, str]) -> int:
    """Instructions (valgrind's Ir) of one `kafka-sim run` from exec until its brokers serve."""
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        base = free_consecutive_ports(BROKERS)
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
               "-c", _START_AND_EXIT, "run", "--brokers", str(BROKERS),
               "--listeners", f"PLAINTEXT://127.0.0.1:{base}", "--log-dirs", tmp,
               "-o", "control.listener="]
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind run failed: {done.stderr[-2000:]}")
    return int(found.group(1))


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cold", action="store_true",
                        help="no bytecode cache: every start compiles the sources")
    parser.add_argument("--instructions", action="store_true",
                        help="count the instructions to start under valgrind (repeatable)")
    args = parser.parse_args()
    if args.instructions:
        if shutil.which("valgrind") is None:
            print("start-up instructions: valgrind is not installed (apt-get install valgrind)")
            return
        with tempfile.TemporaryDirectory(prefix="bench-startup-pycache-") as pycache:
            env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": pycache,
                   "PYTHONHASHSEED": "0"}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            one_start(Path(pycache) / "warm-up", env)  # writes the bytecode, as a second start has
            counts = [start_instructions(env) for _ in range(2)]
        print(f"start-up of `kafka-sim run` ({BROKERS} brokers) until its brokers serve: "
              f"{min(counts) / 1e6:.1f} M instructions (valgrind; {counts[0] / 1e6:.1f} M and "
              f"{counts[1] / 1e6:.1f} M in two runs)")
        return
    firsts, cpus, everys, rsss = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-startup-pycache-") as pycache:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if args.cold:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = pycache
        for run in range(args.runs + (0 if args.cold else 1)):
            with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
                first, cpu, every, rss = one_start(Path(tmp), env)
            if run == 0 and not args.cold:
                continue  # the warm-up start that wrote the bytecode
            firsts.append(first * 1000)
            cpus.append(cpu)
            everys.append(every * 1000)
            rsss.append(rss)
    cache = "no bytecode cache" if args.cold else "bytecode cached"
    load = os.getloadavg()[0]  # the wall-clock figures count waiting for a core: say how busy
    print(f"start-up of `kafka-sim run` ({BROKERS} brokers, empty data dir, {cache}), "
          f"{args.runs} runs, load average {load:.1f} on {os.cpu_count()} cores:")
    print(f"  spawn to first ApiVersions answer: median {statistics.median(firsts):6.1f} ms"
          f"   p90 {p90(firsts):6.1f} ms")
    print(f"  CPU time used by then:             median {statistics.median(cpus):6.1f} ms"
          f"   p90 {p90(cpus):6.1f} ms")
    print(f"  spawn to all {BROKERS} brokers answering: median {statistics.median(everys):6.1f} ms"
          f"   p90 {p90(everys):6.1f} ms")
    print(f"  idle RSS {SETTLE_S:.0f} s later:        median {statistics.median(rsss):6.1f} MiB"
          f"   max {max(rsss):6.1f} MiB")


if __name__ == "__main__":
    main()
