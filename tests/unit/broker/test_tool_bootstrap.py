"""The console tools bootstrap only from servers that take a connection (kafka-python picks one at
random each try and could spend its whole timeout on a stopped broker)."""

from __future__ import annotations

import socket

from broker.tools.command import reachable


def test_only_servers_that_accept_a_connection_are_kept_in_order() -> None:
    with socket.socket() as live, socket.socket() as closed:
        live.bind(("127.0.0.1", 0))
        live.listen()
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        up = f"127.0.0.1:{live.getsockname()[1]}"
        down = f"127.0.0.1:{closed.getsockname()[1]}"
        assert reachable([down, up, "no-port"], 1.0) == [up]
        assert reachable([down], 1.0) == [down]  # none answers: the client reports them all
