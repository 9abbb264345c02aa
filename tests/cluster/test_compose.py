"""docker/docker-compose.yml validates with a compose implementation, and its broker services'
settings start a working cluster: each service's entrypoint and environment run as a local
process against a real ZooKeeper, with the service host names mapped to loopback addresses and
every port to a free one (published ports on 127.0.0.1, as compose publishes them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from broker.control.control_client import ControlClient, ControlError
from broker.server.zookeeper_runner import free_port
from tests.process_cluster import ROOT, wait_until

COMPOSE_FILE = ROOT / "docker" / "docker-compose.yml"
HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9_.-]+):(?P<port>\d+)")
REQUIRED_VARIABLE = re.compile(r"\$\{(?P<name>\w+):\?[^}]*\}")
# What `make compose-up` puts in the environment (a fresh token per clone).
COMPOSE_ENV = {"KAFKA_SIM_CONTROL_TOKEN": "compose-test-token"}


def test_the_compose_file_validates():
    compose = shutil.which("docker-compose")
    if compose is None:  # `make test` installs Debian's docker-compose; never a silent skip
        pytest.fail("docker-compose is not installed: apt-get install docker-compose",
                    pytrace=False)
    result = subprocess.run([compose, "-f", str(COMPOSE_FILE), "config", "-q"],
                            capture_output=True, text=True, check=False,
                            env={**os.environ, **COMPOSE_ENV})
    assert result.returncode == 0, result.stderr
    # Without the token `make compose-up` makes, compose refuses, saying what to do.
    bare = {k: v for k, v in os.environ.items() if k not in COMPOSE_ENV}
    result = subprocess.run([compose, "-f", str(COMPOSE_FILE), "config", "-q"],
                            capture_output=True, text=True, check=False, env=bare)
    assert result.returncode != 0 and "run make compose-up" in result.stderr, result.stderr


def broker_services() -> dict[str, dict]:
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    return {name: s for name, s in services.items() if name.startswith("broker-")}


class ServiceMap:
    """Where each compose service's addresses land on this machine."""

    def __init__(self, services: dict[str, dict], zk_connect: str) -> None:
        self.zk_connect = zk_connect
        self.ip = {name: f"127.0.0.{10 + i}" for i, name in enumerate(sorted(services))}
        self.ports: dict[tuple[str, int], tuple[str, int]] = {}  # (service, port) -> address
        for name, service in services.items():
            published = {int(p.split(":")[-1]) for p in service.get("ports", [])}
            for match in HOST_PORT.finditer(service["environment"]["KAFKA_SIM_LISTENERS"] + "," +
                                            service["environment"]["KAFKA_SIM_CONTROL_LISTENER"]):
                port = int(match["port"])
                host = "127.0.0.1" if port in published else self.ip[name]
                self.ports[(name, port)] = (host, free_port(host))

    def rewrite(self, service: str, value: str) -> str:
        value = value.replace("zookeeper:2181", self.zk_connect)
        value = REQUIRED_VARIABLE.sub(lambda m: COMPOSE_ENV[m["name"]], value)

        def address(match: re.Match) -> str:
            host, port = match["host"], int(match["port"])
            if host == "0.0.0.0":
                return "{}:{}".format(*self.ports[(service, port)])
            if host in self.ip:  # another service, by name
                return "{}:{}".format(*self.ports[(host, port)])
            if host == "127.0.0.1" and (service, port) in self.ports:  # published to the host
                return f"127.0.0.1:{self.ports[(service, port)][1]}"
            return match.group(0)

        return HOST_PORT.sub(address, value)


@pytest.mark.slow
def test_the_compose_brokers_settings_start_a_working_cluster(zk_connect, tmp_path):
    services = broker_services()
    assert sorted(services) == ["broker-0", "broker-1", "broker-2"]
    mapping = ServiceMap(services, zk_connect)
    entrypoint = [str(Path(sys.executable).with_name("kafka-sim")), "run"]  # the image's
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_SIM_")}
    processes = []
    try:
        for name, service in sorted(services.items()):
            env = {k: mapping.rewrite(name, str(v)) for k, v in service["environment"].items()}
            env["KAFKA_SIM_LOG_DIRS"] = str(tmp_path / name)  # the volume
            env["KAFKA_SIM_LOG_LEVEL"] = "warning"
            log = (tmp_path / f"{name}.log").open("wb")
            processes.append(subprocess.Popen(entrypoint, env={**base_env, **env}, cwd=tmp_path,
                                              stdout=log, stderr=subprocess.STDOUT))
        external = [mapping.ports[(name, int(s["ports"][0].split(":")[-1]))][1]
                    for name, s in sorted(services.items())]
        bootstrap = ",".join(f"127.0.0.1:{port}" for port in external)

        def all_up() -> bool:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                return len(admin.describe_cluster()["brokers"]) == 3
            finally:
                admin.close()

        wait_until(all_up, "three brokers in the cluster")
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        described = admin.describe_cluster()["brokers"]
        # clients on the host are told the EXTERNAL (published) addresses
        assert sorted((b["host"], b["port"]) for b in described) == \
            sorted(("127.0.0.1", port) for port in external)
        admin.create_topics([NewTopic("compose", num_partitions=3, replication_factor=3)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(30):
            producer.send("compose", value=b"%d" % i)
        producer.close()
        consumer = KafkaConsumer("compose", bootstrap_servers=bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        assert sorted(int(r.value) for r in consumer) == list(range(30))
        consumer.close()
        # The published control API answers with the token only (it listens beyond loopback).
        control = "http://127.0.0.1:{}".format(mapping.ports[("broker-1", 9644)][1])
        assert len(ControlClient(control, token=COMPOSE_ENV["KAFKA_SIM_CONTROL_TOKEN"]).brokers()) == 3
        with pytest.raises(ControlError) as refused:
            ControlClient(control, token="").brokers()
        assert refused.value.status == 401
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)
