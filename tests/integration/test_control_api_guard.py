"""The control API refuses what a web page could make a browser send it: a cross-origin request,
a Host that is not its address (DNS rebinding), a state change that is not application/json; and,
with `control.token`, any request without the token. Each case, then the same request done right."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.control import ctl
from broker.control.control_client import ControlClient, ControlError
from tests.integration.test_control_api import FakeCluster, ServerThread, raw


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def server(cluster: FakeCluster) -> Iterator[ServerThread]:
    s = ServerThread(cluster)
    yield s
    s.close()


def own_host(server: ServerThread) -> str:
    return f"127.0.0.1:{server.server.port}"


def test_a_cross_origin_simple_post_is_refused(server: ServerThread, cluster: FakeCluster):
    status, body = raw(server, "POST", "/brokers/1/stop", b"x",
                       {"Origin": "http://evil.example", "Content-Type": "text/plain"})
    assert status == 403 and "cross-origin request from 'http://evil.example'" in body["error"]
    status, _ = raw(server, "POST", "/brokers/1/stop", None, {"Origin": "null"})
    assert status == 403
    assert cluster.alive[1]
    status, _ = raw(server, "POST", "/brokers/1/stop", None,
                    {"Origin": f"http://{own_host(server)}"})  # the API's own origin
    assert status == 200 and not cluster.alive[1]


def test_a_state_change_must_be_json(server: ServerThread, cluster: FakeCluster):
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        status, body = raw(server, "POST", "/brokers/1/stop", b"", {"Content-Type": content_type})
        assert status == 415 and "must be application/json" in body["error"], content_type
    status, _ = raw(server, "DELETE", "/faults", None, {"Content-Type": "text/plain"})
    assert status == 415
    assert cluster.alive[1]
    assert raw(server, "GET", "/brokers", None, {"Content-Type": "text/plain"})[0] == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1",
                                  "127.0.0.1:1", "10.0.0.1:{port}", "[::1", "", "a:b"])
def test_a_foreign_host_header_is_refused(server: ServerThread, host: str):
    """A rebound DNS name reaches 127.0.0.1 with the attacker's name in Host."""
    status, body = raw(server, "GET", "/brokers", None,
                       {"Host": host.format(port=server.server.port)})
    assert status == 403 and "is not this control API's address" in body["error"]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}",
                                  "[::1]:{port}"])
def test_loopback_names_of_the_bound_port_are_its_own(server: ServerThread, host: str):
    assert raw(server, "GET", "/brokers", None, {"Host": host.format(port=server.server.port)})[0] == 200


def test_a_token_is_required_once_set(cluster: FakeCluster, monkeypatch, capsys):
    server = ServerThread(cluster, token="s3cret")
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            status, body = raw(server, "GET", "/brokers", None, headers)
            assert status == 401 and "control token" in body["error"], headers
        assert raw(server, "GET", "/brokers", None, {"Authorization": "Bearer s3cret"})[0] == 200
        with pytest.raises(ControlError) as err:
            ControlClient(server.server.url, token="").stop_broker(1)
        assert err.value.status == 401 and cluster.alive[1]
        assert ControlClient(server.server.url, token="s3cret").stop_broker(1)["alive"] is False
        assert ctl.main(["--url", server.server.url, "brokers"]) == 1
        assert "missing or wrong control token" in capsys.readouterr().err
        assert ctl.main(["--url", server.server.url, "--token", "s3cret", "broker", "start", "1"]) == 0
        monkeypatch.setenv("KAFKA_SIM_CONTROL_TOKEN", "s3cret")
        assert ctl.main(["--url", server.server.url, "brokers"]) == 0
        assert cluster.alive[1]
    finally:
        server.close()


_EVIL_PAGE = """<!doctype html><title>evil</title>
<form id="f" method="POST" action="{api}/brokers/2/stop" enctype="text/plain" target="sink">
<input name="x" value="y"></form><iframe name="sink"></iframe>
<script>
// A "simple" request (no preflight) as any page may send; a DELETE needs a preflight first.
fetch("{api}/brokers/1/stop", {{method: "POST", mode: "no-cors", body: "x",
                                  headers: {{"Content-Type": "text/plain"}}}})
  .finally(() => fetch("{api}/faults", {{method: "DELETE"}}).catch(() => null))
  .finally(() => document.getElementById("f").submit());
</script>"""


def test_a_web_page_in_a_real_browser_cannot_stop_a_broker(server: ServerThread,
                                                            cluster: FakeCluster, tmp_path: Path):
    """Debian's chromium opens a page served from another loopback port; the page's scripted
    POSTs and its form reach the API (the guard's refusals are counted) and stop nothing."""
    if shutil.which("chromium") is None:  # `make test` installs it; never a silent skip
        pytest.fail("this test needs Debian's chromium: apt-get install chromium", pytrace=False)
    page = _EVIL_PAGE.format(api=server.server.url).encode()
    cluster.faults.add(1, "Produce", delay_ms=1)

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args) -> None:
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=5000", "--dump-dom",
             f"http://127.0.0.1:{evil.server_address[1]}/"],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
    finally:
        evil.shutdown()
        evil.server_close()
    assert cluster.alive == {1: True, 2: True, 3: True}
    assert server.server.guard.refused >= 3, "the page's requests never reached the API"
    assert len(cluster.faults.list()) == 1  # the DELETE was refused too
