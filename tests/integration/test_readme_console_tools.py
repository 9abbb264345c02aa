"""The console tools' block (docs/console-tools.md) runs as written (each line through a shell, the venv's
kafka-sim pointed at a 3-broker cluster), and each line's output says what the document says."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from tests.docs import section
from tests.integration.console_tools import KAFKA_SIM, ROOT, columns

DOCUMENT, SECTION = "docs/console-tools.md", "# Console tools"


def readme_block(kind: str) -> str:
    block = re.search(rf"```{kind}\n(.*?)```", section(DOCUMENT, SECTION), re.S)
    assert block is not None, f"no ```{kind} block in {DOCUMENT}"
    return block.group(1)


def run_line(line: str, bootstrap: str, cwd: Path) -> str:
    assert "localhost:9092" in line and ".venv/bin/kafka-sim" in line, line
    command = line.replace(".venv/bin/kafka-sim", shlex.quote(str(KAFKA_SIM))).replace(
        "localhost:9092", bootstrap)
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], capture_output=True,
                          text=True, timeout=60, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, f"README line failed ({done.returncode}): {line}\n{done.stderr}"
    assert done.stderr == "", done.stderr  # no progress on a pipe, no warnings
    return done.stdout


@pytest.mark.slow
def test_readme_console_tools_block_runs_as_written(broker_factory, tmp_path):
    cluster = broker_factory({"group.initial.rebalance.delay.ms": "0"}, brokers=3)
    lines = [line for line in readme_block("sh").splitlines() if line.strip()]
    sample = readme_block("text")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    checked = []
    for line in lines:
        out = run_line(line, cluster.bootstrap, tmp_path)
        argv = shlex.split(line.split("| ", 1)[-1])
        tool, action = argv[1], next(a for a in argv if a.startswith("--") and a in (
            "--create", "--describe", "--alter", "--reset-offsets", "--topic"))
        checked.append((tool, action))
        match tool, action:
            case "topics", "--create":
                assert out == "Created topic orders.\n"
            case "topics", "--describe":
                header, *partitions = out.splitlines()
                sample_header, *sample_partitions = sample.split("\n\n")[0].splitlines()
                assert re.sub(r"TopicId: \S+", "", header) == re.sub(r"TopicId: \S+", "",
                                                                      sample_header)
                assert len(partitions) == len(sample_partitions) == 3
                for got in partitions:  # leaders and replica orders are the cluster's own
                    fields = dict(f.split(": ") for f in got.strip("\t").split("\t"))
                    assert sorted(fields["Replicas"].split(",")) == ["0", "1", "2"]
                    assert fields["Leader"] == fields["Replicas"].split(",")[0]
                    assert sorted(fields["Isr"].split(",")) == ["0", "1", "2"]
            case "produce", _:
                assert out == ""
            case "consume", _:  # same key, same partition, in the order produced
                rows = [tuple(r.split("\t")) for r in out.splitlines()]
                assert sorted(r[1:] for r in rows) == [
                    ("alice", "pizza"), ("alice", "soup"), ("carol", "pasta"), ("dave", "salad")]
                alice = [r for r in rows if r[1] == "alice"]
                assert [r[2] for r in alice] == ["pizza", "soup"] and alice[0][0] == alice[1][0]
            case "groups", "--describe":
                assert out.strip("\n") == sample.split("\n\n", 1)[1].strip("\n")
            case "groups", "--reset-offsets":
                assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in columns(out)] == [
                    ("0", "0"), ("1", "0"), ("2", "0")]
                offsets = admin.list_group_offsets("kitchen")["kitchen"]
                assert sorted(o.offset for o in offsets.values()) == [0, 0, 0]
            case "topics", "--alter":
                assert out == ""
                (topic,) = admin.describe_topics(["orders"])
                assert len(topic["partitions"]) == 6
            case _:
                raise AssertionError(f"no check for README line {line}")
    admin.close()
    assert checked == [("topics", "--create"), ("topics", "--describe"), ("produce", "--topic"),
                       ("consume", "--topic"), ("groups", "--describe"),
                       ("groups", "--reset-offsets"), ("topics", "--alter")]
