"""The security document's TLS and SASL section as written: its `kafka-sim certs` and `ctl users` lines, a broker
configured by its properties block (ports made ephemeral), and its Python block, in which
kafka-python, confluent-kafka and aiokafka log in over SASL_SSL."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from broker.config import read_properties_file
from broker.control import ctl
from tests.docs import section

ROOT = Path(__file__).resolve().parents[2]


def section_blocks() -> dict[str, str]:
    text = section("docs/security.md", "## TLS and SASL")
    return {lang: body for lang, body in re.findall(r"```(\w+)\n(.*?)```", text, re.S)}


def test_the_readme_security_example_runs_as_written(broker_factory, tmp_path):
    blocks = section_blocks()
    commands = [shlex.split(line.split("#")[0]) for line in blocks["sh"].splitlines() if line.strip()]
    certs_command = next(c for c in commands if c[1] == "certs")
    subprocess.run([sys.executable, "-m", "broker.server.cli", *certs_command[1:]], cwd=tmp_path,
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    (tmp_path / "security.properties").write_text(blocks["properties"])
    properties = read_properties_file(tmp_path / "security.properties")
    overrides = {k: v.replace("certs/", f"{tmp_path}/certs/").replace(":9092", ":0")
                 for k, v in properties.items()}
    broker = broker_factory(overrides, control=True)
    users_command = next(c for c in commands if c[1:3] == ["ctl", "users"])
    assert ctl.main(["--url", broker.control.url, *users_command[2:]]) == 0
    port = broker.port
    script = blocks["python"].replace("localhost:9092", f"localhost:{port}")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["b'alice, PLAIN, kafka-python'",
                                        "b'bob, SCRAM-SHA-512, confluent-kafka'"]
