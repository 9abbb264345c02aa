"""What `kafka-sim run` loads before its brokers serve: no structlog (its lines are held until
then), no aiohttp (the control API's, loaded when that starts), no Spark, no kazoo, no compression
codecs, no importlib.metadata (crc32c's package code), none of our modules that only a feature not
yet used needs; `kafka-sim ctl` loads no broker.
Checked in a fresh interpreter's sys.modules; the timing itself is tests/bench/bench_startup.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Top-level packages start-up must not import: each is only for a feature not yet used.
NOT_AT_STARTUP = ("aiohttp", "pyspark", "kazoo", "cramjam", "lz4", "snappy", "zstandard",
                  "pipeline", "kafka")  # kafka: kafka-python, the console tools' client
# Our modules that wait for their feature: compaction's first pass, a client-quota request, a TLS
# or SASL listener, the first request of a group, a transaction or topic admin (or LeaderAndIsr for
# an internal topic's partition), an authorizer configured.
OURS_NOT_AT_STARTUP = ("storage.log_cleaner", "broker.admin.client_quotas",
                       "broker.security.ssl_factory", "broker.security.jaas", "broker.security.plain",
                       "broker.coordinator.group.coordinator", "broker.coordinator.group.group_metadata",
                       "broker.coordinator.transaction.transaction_coordinator",
                       "broker.admin.admin_manager", "broker.admin.auto_topic_creation",
                       "broker.authorizer.acl_authorizer",
                       "broker.authorizer.acl", "broker.coordinator.transaction.transaction_marker_channel",
                       # the data path: the first partition's (a broker with none starts without it)
                       "storage.log", "storage.segment", "storage.producer_state", "protocol.records",
                       "broker.replication.partition", "broker.replication.fetch_session",
                       "broker.replication.delayed_fetch", "broker.replication.delayed_produce",
                       "broker.replication.replica_fetcher", "broker.replication.leader_endpoint",
                       "broker.replication.replica_alter_log_dirs",
                       "broker.security.scram")  # SCRAM: the first credential read or made
# The API handlers wait for their API's first request, ApiVersions' aside (start-up's first).
HANDLERS_AT_STARTUP = {"broker.handlers", "broker.handlers.services", "broker.handlers.api_versions"}

# As `kafka-sim run` does: log lines held until the brokers serve (structlog loads then), the
# control server built before the brokers start (it refuses a non-loopback address first), started
# once they serve.
START_EMBEDDED_CLUSTER = textwrap.dedent("""
    import asyncio, json, sys
    from broker.server import cli  # what the console script imports
    from broker import logs
    from broker.config import build_config
    from broker.control.control_server import ControlServer
    from broker.server.cluster import Cluster
    from broker.server.log_setup import configure_logging

    async def main():
        config = build_config({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": sys.argv[1],
                               "control.listener": ""}, environ={})
        cluster = Cluster(config, 3)
        control = ControlServer(cluster, "127.0.0.1", 0)
        await cluster.start()
        serving = sorted(sys.modules)
        logs.release()
        await control.start()
        with_control = sorted(sys.modules)
        await control.stop()
        await cluster.stop()
        print(json.dumps({"serving": serving, "with_control": with_control}))

    logs.hold_until_serving(lambda: configure_logging("info"))
    asyncio.run(main())
""")


def loaded_top_level(modules: list[str]) -> set[str]:
    return {name.partition(".")[0] for name in modules}


def run_python(code: str, *args: str) -> str:
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_an_embedded_cluster_serves_without_the_optional_packages(tmp_path):
    loaded = json.loads(run_python(START_EMBEDDED_CLUSTER, str(tmp_path)).splitlines()[-1])
    assert loaded_top_level(loaded["serving"]) & {"structlog", *NOT_AT_STARTUP} == set()
    assert "importlib.metadata" not in loaded["serving"]
    assert set(loaded["serving"]) & set(OURS_NOT_AT_STARTUP) == set()
    assert {m for m in loaded["serving"] if m.startswith("broker.handlers")} == HANDLERS_AT_STARTUP
    # The control API brings aiohttp once it starts, and the release of the held lines structlog
    # (what the check above would have caught).
    assert {"aiohttp", "structlog"} <= loaded_top_level(loaded["with_control"])


def test_the_cli_module_loads_no_broker_subsystem():
    """`kafka-sim ctl` and `--help` pay for the command line only."""
    code = "import json, sys; import broker.server.cli; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(run_python(code))
    ours = {m for m in loaded if m.partition(".")[0] in ("broker", "protocol", "storage", "timer")}
    assert ours == {"broker", "broker.server", "broker.server.cli"}
    assert loaded_top_level(loaded) & {"asyncio", "structlog", *NOT_AT_STARTUP} == set()
