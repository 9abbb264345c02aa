"""The multi-process harness (tests/process_cluster.py) picks free ports before its brokers bind
them: a broker whose port another process took meanwhile gets new ports and starts, instead of
the test failing after a minute of waiting for it to register."""

from __future__ import annotations

import socket

import pytest

from tests.process_cluster import ProcessCluster

pytestmark = pytest.mark.slow


def test_a_broker_whose_free_port_was_taken_starts_on_new_ports(zk_connect, tmp_path):
    cluster = ProcessCluster(zk_connect, tmp_path, brokers=1)
    taken = cluster.ports[0]
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            cluster.start()
            assert cluster.ports[0] != taken
            assert cluster.registered(0)
            assert "address already in use" in (tmp_path / "broker-0.log").read_text()
        finally:
            cluster.stop()
