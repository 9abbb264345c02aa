"""The README's tour runs as written: every line of its `sh` blocks, in order, through the venv's
real `kafka-sim` against a 3-broker cluster, and each line does what its comment says: an acks=all
produce parks in the leader's produce purgatory while the followers are paused, its timeout a task
on the timing wheel, and completes once both followers have fetched the record; then its Python
block fences a transactional producer with a second one of the same transactional.id."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time

import pytest

from tests.cluster.test_readme_ctl_block import (
    KAFKA_SIM,
    POLL_TIMEOUT_S,
    TOPIC,
    Walkthrough,
    table,
)
from tests.docs import section


def tour_blocks() -> tuple[list[tuple[str, list[str]]], str, list[tuple[str, list[str]]]]:
    """The tour's first `sh` block, its `python` block (the fencing) and the `sh` block after it."""
    text = section("README.md", "## A tour of the machinery")
    blocks = re.findall(r"```(sh|python)\n(.*?)```", text, re.S)
    assert [kind for kind, _ in blocks] == ["sh", "python", "sh"], blocks

    def lines(block: str) -> list[tuple[str, list[str]]]:
        return [(line, shlex.split(line, comments=True)) for line in block.splitlines()
                if line.strip()]

    return lines(blocks[0][1]), blocks[1][1], lines(blocks[2][1])


class Tour(Walkthrough):
    """The walk-through's runner, with a line sent to the background (`&`) and the tour's checks."""

    producer: subprocess.Popen | None = None

    def start_producer(self, argv: list[str]) -> None:
        # `echo TEXT | .venv/bin/kafka-sim produce ... &`: at this cluster, in the background
        assert argv[0] == "echo" and argv[2:4] == ["|", ".venv/bin/kafka-sim"] and argv[-1] == "&"
        self.producer = subprocess.Popen(
            [str(KAFKA_SIM), *argv[4:-1], "--bootstrap-server", self.bootstrap],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=self.env, cwd=self.workdir)
        assert self.producer.stdin is not None
        self.producer.stdin.write(argv[1] + "\n")
        self.producer.stdin.close()
        # it parks: one delayed operation in broker 0's produce purgatory
        self.await_delayed_produces(1)

    def await_delayed_produces(self, count: int) -> dict:
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            stats = self.client.purgatory()
            if stats["brokers"]["0"]["produce"]["delayed"] == count:
                return stats
            assert time.monotonic() < deadline, f"never {count} delayed produce(s): {stats}"
            time.sleep(0.05)

    def check_tour(self, argv: list[str], out: str) -> None:
        match argv[2:]:
            case ["replication", "pause", broker]:
                assert out == f"replication paused on broker {broker}\n"
            case ["purgatory"]:
                stats = json.loads(out)
                produce = stats["brokers"]["0"]["produce"]
                assert (produce["delayed"], produce["watched"]) == (1, 1), produce
                # its timeout (the producer's 30 s request timeout) waits in a wheel bucket
                assert sum(level["tasks"] for level in stats["timer"]["levels"]) >= 1
            case ["partitions", topic]:
                assert topic == TOPIC
                (p,) = json.loads(out)
                leader = {s["broker"]: s for s in p["replicas_state"]}[p["leader"]]
                assert (p["leader"], leader["log_end_offset"], leader["high_watermark"]) == (
                    0, 4, 3), p
            case ["replication", "resume", "1"]:
                assert out == "replication resumed on broker 1\n"
                self.await_partition("broker 1 at the log end",
                                     lambda p: {s["broker"]: s["log_end_offset"]
                                                for s in p["replicas_state"]}[1] == 4)
                # broker 2, still in the ISR, lacks the record: the produce still waits
                assert self.producer is not None and self.producer.poll() is None
                assert self.client.purgatory()["brokers"]["0"]["produce"]["delayed"] == 1
            case ["replication", "resume", "2"]:
                assert out == "replication resumed on broker 2\n"
                assert self.producer is not None
                assert self.producer.wait(POLL_TIMEOUT_S) == 0, self.producer.stderr
                produce = self.await_delayed_produces(0)["brokers"]["0"]["produce"]
                assert produce["completed"] >= 1 and produce["expired"] == 0, produce
                state = self.partition()
                assert {s["broker"]: s for s in state["replicas_state"]}[0]["high_watermark"] == 4
            case ["transactions", transactional_id]:
                # state Empty, epoch 2: the abort fenced epoch 0 with epoch 1, the second
                # producer's retried InitProducerId got epoch 2 (Kafka's coordinator)
                rows = {r["TRANSACTIONAL_ID"]: r for r in table(out)}
                assert (rows[transactional_id]["STATE"], rows[transactional_id]["EPOCH"]) == (
                    "Empty", "2"), out
            case _:
                raise AssertionError(f"no check for README command {shlex.join(argv)}")


@pytest.mark.slow
def test_the_readme_tour_runs_as_written(broker_factory, capsys, tmp_path):
    commands, fence, after_fence = tour_blocks()
    cluster = broker_factory(brokers=3, control=True)
    assert cluster.control is not None
    example = re.search(r"```python\n(.*?)```",
                        section("README.md", "## Use it from kafka-python"), re.S).group(1)
    exec(example.replace("localhost:9092", cluster.bootstrap), {})
    assert len(capsys.readouterr().out.splitlines()) == 3

    tour = Tour(cluster.control.url, tmp_path, cluster.bootstrap)
    tour.await_partition("a full ISR", lambda p: sorted(p["isr"]) == [0, 1, 2])
    try:
        for line, argv in commands:
            if argv[-1] == "&":
                tour.start_producer(argv)
            else:
                tour.check_tour(argv, tour.run(line, argv))
    finally:
        if tour.producer is not None and tour.producer.poll() is None:
            tour.producer.kill()
    assert tour.producer is not None and tour.producer.returncode == 0

    # Fencing: the python block as written, then its ctl line
    assert "localhost:9092" in fence
    exec(fence.replace("localhost:9092", cluster.bootstrap), {})
    assert capsys.readouterr().out == "first producer: _FENCED\n"
    for line, argv in after_fence:
        tour.check_tour(argv, tour.run(line, argv))
