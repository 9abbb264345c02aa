"""The `kafka-sim ctl` walk-through of docs/control-api.md runs as written: every line of its `sh` block, in order, through the venv's real `kafka-sim` console
script, against a 3-broker cluster on ephemeral ports, and each line does what its comment says.

Its lines carry no URL: `KAFKA_SIM_CONTROL_URL` points them at this test's control API.
Between lines the test awaits cross-process state with bounded polls over the control API (what a
person typing the next command gets for free), never with fixed sleeps.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.control.control_client import ControlClient
from tests.docs import section

DOCUMENT, SECTION = "docs/control-api.md", "# Replication, failover and the control API"
KAFKA_SIM = Path(sys.executable).parent / "kafka-sim"  # the venv's console script, not a module
TOPIC = "greetings"
# A follower paused by `replication pause` leaves the ISR after replica.lag.time.max.ms (30 s by
# default); a small value keeps the test short. As Kafka requires, the follower's long-poll wait
# stays well below it, or idle followers would look lagging between two fetches.
OVERRIDES = {"replica.lag.time.max.ms": "1000", "replica.fetch.wait.max.ms": "100"}
POLL_TIMEOUT_S = 20.0


def ctl_block() -> list[tuple[str, list[str]]]:
    """The section's `sh` block: (line as written, argv as a shell splits it, comment dropped)."""
    block = re.search(r"```sh\n(.*?)```", section(DOCUMENT, SECTION), re.S)
    assert block is not None, "no ```sh block in the control API section"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    commands = [(line, shlex.split(line, comments=True)) for line in lines]
    for line, argv in commands:
        assert argv[:2] == [".venv/bin/kafka-sim", "ctl"] or (
            argv[0] == "echo" and argv[2:5] == ["|", ".venv/bin/kafka-sim", "produce"]
        ), f"neither a ctl command nor one record piped to kafka-sim produce: {line}"
    return commands


def table(text: str) -> list[dict[str, str]]:
    """Rows of a `kafka-sim ctl` table, cut at the header's column starts (cells may hold spaces)."""
    header, *rows = text.rstrip("\n").splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [{n: row[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)} for row in rows]


def options(argv: list[str]) -> dict[str, str | bool]:
    """`--name value` pairs and bare `--flag`s of a command line."""
    out: dict[str, str | bool] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else "--"
            out[arg[2:]] = True if nxt.startswith("--") else nxt
    return out


class Walkthrough:
    """Runs the README's lines and holds what earlier lines established for the later checks."""

    def __init__(self, url: str, workdir: Path, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.client = ControlClient(url, timeout=30)
        self.env = {**os.environ, "KAFKA_SIM_CONTROL_URL": url}
        self.workdir = workdir
        self.stopped: set[int] = set()
        self.addresses: dict[int, str] = {}
        self.controller: tuple[int, int] | None = None  # (id, controller epoch)
        self.epoch_before_failover: int | None = None
        self.epoch_after_failover: int | None = None
        self.faults: list[tuple[int, dict[str, str | bool]]] = []  # (id, options of its line)
        self.paused: set[int] = set()

    # -- helpers ----------------------------------------------------------------------------

    def run(self, line: str, argv: list[str]) -> str:
        stdin = None
        if argv[0] == "echo":  # `echo TEXT | .venv/bin/kafka-sim produce ...`, at this cluster
            stdin, argv = argv[1] + "\n", [*argv[3:], "--bootstrap-server", self.bootstrap]
        argv = [str(KAFKA_SIM), *argv[1:]]  # .venv/bin/kafka-sim -> this venv's kafka-sim
        done = subprocess.run(argv, env=self.env, cwd=self.workdir, capture_output=True,
                              text=True, timeout=60, input=stdin)
        assert done.returncode == 0, (
            f"README line failed ({done.returncode}): {line}\n{done.stdout}{done.stderr}")
        return done.stdout

    def partition(self) -> dict:
        found = [p for p in self.client.partitions(TOPIC) if p["partition"] == 0]
        return found[0] if found else {}

    def await_partition(self, what: str, condition: Callable[[dict], bool]) -> dict:
        """Poll the control API until the partition satisfies `condition` (bounded)."""
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            state = self.partition()
            if state and condition(state):
                return state
            if time.monotonic() > deadline:
                raise AssertionError(f"{TOPIC}-0 never got {what}: {state}")
            time.sleep(0.05)

    def await_brokers(self, what: str, condition: Callable[[list[dict]], bool]) -> list[dict]:
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            brokers = self.client.brokers()
            if condition(brokers):
                return brokers
            if time.monotonic() > deadline:
                raise AssertionError(f"brokers never got {what}: {brokers}")
            time.sleep(0.05)

    # -- one check per README line ----------------------------------------------------------

    def check(self, argv: list[str], out: str) -> None:
        if argv[0] == "echo":
            self.check_produce(out)
            return
        match argv[2:]:
            case ["brokers"]:
                self.check_brokers(out)
            case ["partitions", topic]:
                assert topic == TOPIC
                self.check_partitions(out)
            case ["broker", "stop", broker]:
                self.check_stop(int(broker), out)
            case ["broker", "start", broker]:
                self.check_start(int(broker), out)
            case ["elect-leaders"]:
                self.check_elect_leaders(out)
            case ["replication", "pause", broker]:
                self.check_pause(int(broker), out)
            case ["replication", "resume", broker]:
                self.check_resume(int(broker), out)
            case ["fault", "add", *rest]:
                self.check_fault_add(options(rest), out)
            case ["fault", "list"]:
                self.check_fault_list(out)
            case ["fault", "clear"]:
                self.check_fault_clear(out)
            case ["purgatory"]:
                self.check_purgatory(out)
            case _:
                raise AssertionError(f"no check for README command {shlex.join(argv)}")

    def check_brokers(self, out: str) -> None:
        # id, address, alive, controller, controller epoch
        rows = table(out)
        assert [r["ID"] for r in rows] == ["0", "1", "2"], out
        assert all(r["ALIVE"] == ("no" if int(r["ID"]) in self.stopped else "yes") for r in rows)
        assert [r["CONTROLLER"] for r in rows].count("*") == 1, out
        assert len({r["CONTROLLER_EPOCH"] for r in rows}) == 1 and rows[0]["CONTROLLER_EPOCH"]
        self.addresses = {int(r["ID"]): r["ADDRESS"] for r in rows}
        (controller,) = [r for r in rows if r["CONTROLLER"] == "*"]
        self.controller = (int(controller["ID"]), int(controller["CONTROLLER_EPOCH"]))
        assert all(re.fullmatch(r"127\.0\.0\.1:\d+", a) for a in self.addresses.values()), out

    def check_partitions(self, out: str) -> None:
        # leader, leader epoch, ISR, per replica LEO/HW/lag
        (p,) = json.loads(out)
        assert (p["topic"], p["partition"], p["replicas"]) == (TOPIC, 0, [0, 1, 2]), p
        assert p["leader"] in p["isr"]
        states = {s["broker"]: s for s in p["replicas_state"]}
        assert set(states) == {0, 1, 2}
        assert all({"log_end_offset", "high_watermark", "lag"} <= set(s) for s in states.values())
        assert states[p["leader"]]["log_end_offset"] == 3  # the kafka-python example's records
        if 0 not in self.stopped:  # before the failover: broker 0 is the one the README kills
            assert (p["leader"], p["leader_epoch"]) == (0, 0), p
            self.epoch_before_failover = p["leader_epoch"]
        else:  # a new leader, leader epoch + 1, ISR without 0
            assert p["leader"] != 0 and 0 not in p["isr"], p
            assert self.epoch_before_failover is not None
            assert p["leader_epoch"] == self.epoch_before_failover + 1, p
            self.epoch_after_failover = p["leader_epoch"]

    def check_stop(self, broker: int, out: str) -> None:
        # broker 0 leaves as a crashed broker would
        assert out == f"broker {broker} stopped\n"
        self.stopped.add(broker)
        self.await_partition(f"a leader other than {broker}",
                             lambda p: p["leader"] not in self.stopped)
        # The README's text: when the controller's broker stops, another takes over, epoch + 1.
        assert self.controller is not None
        old_id, old_epoch = self.controller
        expected_epoch = old_epoch + 1 if old_id == broker else old_epoch
        brokers = self.await_brokers(f"a live controller with epoch {expected_epoch}", lambda bs: any(
            b["controller"] and b["controller_epoch"] == expected_epoch for b in bs))
        assert {b["id"]: b["alive"] for b in brokers}[broker] is False
        controller = next(b for b in brokers if b["controller"])
        assert controller["id"] != broker and (old_id == broker or controller["id"] == old_id)

    def check_start(self, broker: int, out: str) -> None:
        # back on its port: truncates, catches up, rejoins
        assert out == f"broker {broker} started\n"
        self.stopped.discard(broker)
        brokers = {b["id"]: b for b in self.client.brokers()}
        assert brokers[broker]["alive"] is True
        assert f"{brokers[broker]['host']}:{brokers[broker]['port']}" == self.addresses[broker]
        state = self.await_partition(f"broker {broker} back in the ISR",
                                     lambda p: broker in p["isr"])
        leos = {s["broker"]: s["log_end_offset"] for s in state["replicas_state"]}
        assert leos[broker] == leos[state["leader"]], state
        assert state["leader"] != broker  # still led elsewhere: elect-leaders has work to do

    def check_elect_leaders(self, out: str) -> None:
        # leadership back to the preferred replicas
        rows = [r for r in table(out) if r["TOPIC"] == TOPIC]
        assert [(r["PARTITION"], r["LEADER"], r["PREFERRED"]) for r in rows] == [("0", "0", "0")]
        assert self.epoch_after_failover is not None
        assert int(rows[0]["LEADER_EPOCH"]) == self.epoch_after_failover + 1, out
        assert self.partition()["leader"] == 0

    def check_pause(self, broker: int, out: str) -> None:
        # broker 2's followers stop fetching
        assert out == f"replication paused on broker {broker}\n"
        self.paused.add(broker)
        assert self.partition()["leader"] != broker  # it follows greetings-0

    def check_produce(self, out: str) -> None:
        # a record broker 2 does not fetch: it falls behind, and after replica.lag.time.max.ms
        # the ISR shrinks (caught up, it would have stayed in sync however long it was paused)
        assert out == ""
        [broker] = self.paused
        state = self.await_partition(f"an ISR without {broker}", lambda p: broker not in p["isr"])
        assert state["leader"] == 0

    def check_resume(self, broker: int, out: str) -> None:
        # broker 2 catches up and rejoins the ISR
        assert out == f"replication resumed on broker {broker}\n"
        self.paused.discard(broker)
        self.await_partition("the full ISR again", lambda p: sorted(p["isr"]) == [0, 1, 2])

    def check_fault_add(self, opts: dict[str, str | bool], out: str) -> None:
        m = re.fullmatch(r"fault (\d+) added: broker (\d+) (\w+)(?: on (\S+))?: (.*), (.*)\n", out)
        assert m is not None, out
        fault_id, broker, api, partition, action, times = m.groups()
        assert (broker, api, partition) == (opts["broker"], opts["api"], opts.get("partition"))
        assert times == (f"{opts['count']} time(s)" if "count" in opts else "until cleared")
        assert re.fullmatch(self.action(opts), action), out
        self.faults.append((int(fault_id), opts))

    @staticmethod
    def action(opts: dict[str, str | bool]) -> str:
        """A regex for how ctl shows a fault's action, from the options of its line."""
        if "error" in opts:
            error = str(opts["error"])
            return rf"error {error} \(\w+\)" if error.isdigit() else rf"error -?\d+ \({error}\)"
        if "delay-ms" in opts:
            return f"delay {opts['delay-ms']} ms"
        (flag,) = [f for f in ("drop-response", "disconnect") if f in opts]
        return flag

    def check_fault_list(self, out: str) -> None:
        # id, broker, API, partition, action, remaining, hits
        assert out.split("\n", 1)[0].split() == [
            "ID", "BROKER", "API", "PARTITION", "ACTION", "REMAINING", "HITS"], out
        rows = table(out)
        assert [int(r["ID"]) for r in rows] == [i for i, _ in self.faults], out
        for row, (_, opts) in zip(rows, self.faults, strict=True):
            assert (row["BROKER"], row["API"], row["PARTITION"]) == (
                opts["broker"], opts["api"], opts.get("partition", "*")), row
            assert re.fullmatch(self.action(opts), row["ACTION"]), row
            # nothing sends broker 1 a Produce, nor a Fetch (it leads nothing now)
            assert (row["REMAINING"], row["HITS"]) == (str(opts.get("count", "-")), "0"), row

    def check_fault_clear(self, out: str) -> None:
        # all of them
        assert out == f"cleared {len(self.faults)} fault(s)\n"
        assert self.client.faults() == []
        self.faults = []

    def check_purgatory(self, out: str) -> None:
        # per broker: fetch, produce, delete_records, heartbeat, rebalance, throttle; the timer;
        # fetch sessions
        stats = json.loads(out)
        assert set(stats["brokers"]) == {"0", "1", "2"}, stats.keys()
        for purgatories in stats["brokers"].values():
            assert set(purgatories) == {"fetch", "produce", "delete_records", "heartbeat", "rebalance",
                                        "throttle"}
            for p in purgatories.values():
                assert {"delayed", "watched", "completed", "expired"} <= set(p), p
        # followers long-poll their leader: broker 0 leads greetings-0 and has fetches parked
        assert stats["brokers"]["0"]["fetch"]["expired"] + \
            stats["brokers"]["0"]["fetch"]["completed"] > 0
        assert stats["timer"]["levels"] and all(
            {"tick_ms", "occupied_buckets", "tasks"} <= set(level)
            for level in stats["timer"]["levels"])
        # the followers fetching from broker 0 do so in fetch sessions of their own (KIP-227)
        assert set(stats["fetch_sessions"]) == {"0", "1", "2"}
        assert stats["fetch_sessions"]["0"]["privileged"] >= 1


@pytest.mark.slow
def test_readme_ctl_block_runs_as_written(broker_factory, capsys, tmp_path):
    commands = ctl_block()
    cluster = broker_factory(OVERRIDES, brokers=3, control=True)
    assert cluster.control is not None

    # `greetings` exists first: the README's kafka-python example produces to it (and creates
    # it: one partition, replication factor 3 on a 3-broker cluster).
    example = re.search(r"```python\n(.*?)```",
                        section("README.md", "## Use it from kafka-python"), re.S).group(1)
    assert "localhost:9092" in example
    exec(example.replace("localhost:9092", cluster.bootstrap), {})
    assert len(capsys.readouterr().out.splitlines()) == 3

    walk = Walkthrough(cluster.control.url, tmp_path, cluster.bootstrap)
    walk.await_partition("a full ISR", lambda p: sorted(p["isr"]) == [0, 1, 2])
    for line, argv in commands:
        walk.check(argv, walk.run(line, argv))
    assert not walk.stopped and not walk.paused and not walk.faults
