"""The web console of a broker process in a multi-process cluster on a real ZooKeeper: every
page's snapshot is read from ZooKeeper and the process's own broker without a section failing."""

from __future__ import annotations

import json
import urllib.request

import pytest
from kafka import KafkaProducer

from broker.control.web_console import PAGES
from tests.process_cluster import ProcessCluster

pytestmark = pytest.mark.slow


def first_event(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as stream:
        while True:
            line = stream.readline().decode()
            if line.startswith("data: "):
                return json.loads(line.removeprefix("data: "))


def test_every_console_page_of_a_broker_process(zk_connect, tmp_path):
    cluster = ProcessCluster(zk_connect, tmp_path, brokers=1)
    cluster.start()
    try:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for i in range(3):
            producer.send("watched", b"%d" % i).get(timeout=30)
        producer.close()
        base = f"http://127.0.0.1:{cluster.control_ports[0]}/console/"
        for page in PAGES:
            with urllib.request.urlopen(base + page.slug, timeout=10) as response:
                assert f'data-page="{page.name}"' in response.read().decode()
            snapshot = first_event(f"{base}events?page={page.name}")
            failed = {name: section for name, section in snapshot.items()
                      if isinstance(section, dict) and "error" in section}
            assert failed == {}, page.name
            assert [b["id"] for b in snapshot["brokers"]] == [0]
            if page.name == "partitions":
                [watched] = [p for p in snapshot["partitions"] if p["topic"] == "watched"]
                assert watched["replicas_state"][0]["log_end_offset"] == 3
            if page.name == "timer":
                assert snapshot["purgatory"]["timer"]["levels"][0]["wheel_size"] == 20
                assert list(snapshot["purgatory"]["brokers"]) == ["0"]
    finally:
        cluster.stop()
