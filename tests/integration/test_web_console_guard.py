"""The web console's routes behind the control API's guard, over real HTTP: the token taken once
from the entry URL into an HttpOnly SameSite=Strict cookie that the console's own requests then
carry, what the pages ship (their script, stylesheet, a CSP that forbids framing), and the event
stream: a JSON snapshot per event, ended at once when the server stops."""

from __future__ import annotations

import http.client
import json
import time
import urllib.request
from collections.abc import Iterator

import pytest
import structlog.testing

from broker.control.web_console import PAGES, PAGES_BY_NAME, render_page, snapshot
from tests.browser import Browser
from tests.integration.test_control_api import FakeCluster, ServerThread, raw


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def server(cluster: FakeCluster) -> Iterator[ServerThread]:
    s = ServerThread(cluster, token="s3cret")
    yield s
    s.close()


def get(server: ServerThread, path: str, headers: dict[str, str] | None = None
        ) -> http.client.HTTPResponse:
    """A GET that does not follow redirects (the entry URL answers 303 with its cookie)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server.port, timeout=10)
    connection.request("GET", path, headers=headers or {})
    return connection.getresponse()


def test_the_token_goes_from_the_entry_url_into_a_strict_http_only_cookie(
        server: ServerThread, cluster: FakeCluster):
    assert get(server, "/console/").status == 401
    assert get(server, "/console/?token=wrong").status == 401
    assert get(server, "/brokers?token=s3cret").status == 401  # only the entry URL takes it
    landing = get(server, "/console/?token=s3cret")
    assert landing.status == 303 and landing.headers["Location"] == "/console/"
    cookie = landing.headers["Set-Cookie"]
    name = f"kafka-sim-control-token-{server.server.port}"
    assert cookie.startswith(f"{name}=s3cret;")
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes
    assert get(server, "/console?token=s3cret").status == 303  # no slash: on to the entry URL

    jar = {"Cookie": f"{name}=s3cret"}
    page = get(server, "/console/", jar)
    assert page.status == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["Referrer-Policy"] == "no-referrer"
    body = page.read().decode()
    assert '<script src="/console/static/console.js">' in body and 'data-page="cluster"' in body
    assert get(server, "/console/", {"Cookie": f"{name}=wrong"}).status == 401
    # The page's script calls the JSON routes with the cookie; the guard's other rules stand.
    assert raw(server, "GET", "/brokers", None, jar)[0] == 200
    status, body = raw(server, "POST", "/brokers/1/stop", b"{}",
                       {**jar, "Origin": "http://127.0.0.1:1"})
    assert status == 403 and cluster.alive[1]
    status, _ = raw(server, "POST", "/brokers/1/stop", b"", {**jar, "Content-Type": "text/plain"})
    assert status == 415 and cluster.alive[1]
    own_origin = f"http://127.0.0.1:{server.server.port}"
    assert raw(server, "POST", "/brokers/1/stop", b"{}", {**jar, "Origin": own_origin})[0] == 200
    assert not cluster.alive[1]


def test_every_page_and_its_files_are_served(server: ServerThread):
    jar = {"Authorization": "Bearer s3cret"}
    for page in PAGES:
        response = get(server, f"/console/{page.slug}", jar)
        assert response.status == 200, page
        assert f'data-page="{page.name}"' in response.read().decode()
    script = get(server, "/console/static/console.js", jar)
    assert script.status == 200 and script.headers["Content-Type"].startswith("text/javascript")
    assert "EventSource" in script.read().decode()
    style = get(server, "/console/static/console.css", jar)
    assert style.status == 200 and style.headers["Content-Type"].startswith("text/css")
    assert get(server, "/console/static/../control_api.py", jar).status == 404
    assert get(server, "/console/static/nope.js", jar).status == 404
    assert get(server, "/console/events?page=nope", jar).status == 404


def test_a_snapshot_cannot_close_the_pages_script_element():
    page = PAGES[0]
    html = render_page(page, {"brokers": [{"id": 1, "host": "</script><script>alert(1)//"}]})
    embedded = html.split('<script id="snapshot" type="application/json">')[1].split("</script>")[0]
    assert "<" not in embedded
    assert json.loads(embedded)["brokers"][0]["host"] == "</script><script>alert(1)//"


def test_the_event_stream_pushes_snapshots_and_ends_when_the_server_stops(cluster: FakeCluster):
    server = ServerThread(cluster)
    request = urllib.request.Request(f"{server.server.url}/console/events?page=partitions")
    stream = urllib.request.urlopen(request, timeout=10)
    try:
        assert stream.headers["Content-Type"] == "text/event-stream"
        events = []
        while len(events) < 2:  # the first at once, the next a second later
            line = stream.readline().decode()
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
        first = events[0]
        assert first["page"] == "partitions" and [b["id"] for b in first["brokers"]] == [1, 2, 3]
        assert [p["partition"] for p in first["partitions"]] == [0, 1]
        assert events[1]["time_ms"] > first["time_ms"]
        cluster.alive[2] = False
        while True:
            line = stream.readline().decode()
            if line.startswith("data: "):
                assert [b["alive"] for b in json.loads(line[6:])["brokers"]] == [True, False, True]
                break
        started = time.monotonic()
        server.close()
        assert stream.read().strip() == b""  # ended cleanly, not cut at the shutdown timeout
        assert time.monotonic() - started < 1.5
    finally:
        stream.close()


async def test_the_partitions_page_may_name_a_topic(cluster: FakeCluster):
    page = PAGES_BY_NAME["partitions"]
    assert [p["topic"] for p in (await snapshot(cluster, page, "events"))["partitions"]] == [
        "events"] * 2
    assert (await snapshot(cluster, page, "nope"))["partitions"] == {"error": "not found: nope"}
    assert [b["id"] for b in (await snapshot(cluster, page, "nope"))["brokers"]] == [1, 2, 3]


def test_the_log_names_the_console_url(cluster: FakeCluster):
    with structlog.testing.capture_logs() as logs:
        server = ServerThread(cluster)
    try:
        events = [entry["event"] for entry in logs]
        assert f"console at {server.server.url}/console/" in events
        assert events.index("control API listening") < events.index(f"console at {server.server.url}/console/")
    finally:
        server.close()


async def test_a_browser_session_with_a_token(server: ServerThread, cluster: FakeCluster,
                                              tmp_path):
    """chromium opens the entry URL with the token once: the page's stream and its buttons then
    work on the cookie, which its script cannot read, and the token leaves the address bar."""
    async with Browser(tmp_path / "chromium") as browser:
        await browser.navigate(f"{server.server.url}/console/?token=s3cret")
        await browser.wait_for("Number(document.body.dataset.renders) >= 2")  # the stream too
        assert await browser.evaluate("location.pathname + location.search") == "/console/"
        assert await browser.evaluate("document.cookie") == ""
        await browser.evaluate("window.confirm = () => true; "
                               "document.querySelector('[data-action=stop-1]').click()")
        await browser.wait_for("document.querySelector('tr[data-broker=\"1\"]')"
                               ".dataset.alive === 'false'")
        assert not cluster.alive[1]
        # Declined: no request (an accepted one disables its button before it is sent).
        assert await browser.evaluate(
            "(() => { window.confirm = () => false; const start = () => document.querySelector("
            "'[data-action=start-1]'); start().click(); return start().disabled; })()") is False
        assert await browser.evaluate("fetch('/brokers').then((r) => r.status)") == 200
        assert not cluster.alive[1]
