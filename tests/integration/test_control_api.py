"""The control API over real HTTP: every route through ControlClient and `ctl.main`, bad requests
answered 4xx with a message, and no listening beyond loopback unless asked.

The cluster behind it is `FakeCluster`, a small in-memory ClusterControl: the HTTP layer, the
client and the CLI are what these tests exercise; the real Cluster has its own tests.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from broker.control import ctl
from broker.control.control_client import ControlClient, ControlError
from broker.control.control_server import ControlServer, RemoteBindRefused
from broker.control.faults import FaultInjector


class FakeCluster:
    """Three brokers, one topic with two partitions, replication that can be paused."""

    def __init__(self) -> None:
        self.alive = {1: True, 2: True, 3: True}
        self.controller, self.controller_epoch = 1, 1
        self.paused: set[int] = set()
        self.elections = 0
        self.faults = FaultInjector()
        self.loop_thread: str | None = None  # where stop/start ran: the server's loop

    async def brokers_info(self) -> list[dict]:
        return [{"id": b, "host": "127.0.0.1", "port": 9091 + b, "alive": alive,
                 "controller": b == self.controller, "controller_epoch": self.controller_epoch}
                for b, alive in self.alive.items()]

    def _known(self, broker_id: int) -> None:
        if broker_id not in self.alive:
            raise KeyError(f"unknown broker {broker_id}")

    async def stop_broker(self, broker_id: int) -> None:
        self._known(broker_id)
        if not self.alive[broker_id]:
            raise ValueError(f"broker {broker_id} is already stopped")
        await asyncio.sleep(0)
        self.loop_thread = threading.current_thread().name
        self.alive[broker_id] = False
        if broker_id == self.controller:
            self.controller = next(b for b, up in self.alive.items() if up)
            self.controller_epoch += 1

    async def start_broker(self, broker_id: int) -> None:
        self._known(broker_id)
        if self.alive[broker_id]:
            raise ValueError(f"broker {broker_id} is already running")
        self.alive[broker_id] = True

    async def partitions(self, topic: str | None) -> list[dict]:
        if topic not in (None, "events"):
            raise KeyError(topic)  # a bare key: the API words it
        isr = [b for b, up in self.alive.items() if up and b not in self.paused]
        return [{"topic": "events", "partition": p, "leader": isr[0], "leader_epoch": 0,
                 "isr": isr, "replicas": [1, 2, 3],
                 "replicas_state": [{"broker": b, "log_end_offset": 10, "high_watermark": 10,
                                     "lag": 0} for b in (1, 2, 3)]}
                for p in (0, 1)]

    def pause_replication(self, broker_id: int) -> None:
        self._known(broker_id)
        self.paused.add(broker_id)

    async def elect_preferred_leaders(self) -> None:
        if not any(self.alive.values()):
            raise ValueError("there is no controller right now")
        self.elections += 1

    def resume_replication(self, broker_id: int) -> None:
        self._known(broker_id)
        self.paused.discard(broker_id)

    def purgatory(self) -> dict:
        return {"brokers": {str(b): {"produce": {"watched_keys": 0, "delayed": 0, "completed": 3,
                                                 "expired": 1}} for b in self.alive},
                "timer": {"pending": 0, "buckets_per_level": [0, 0]}}


class ServerThread:
    """A ControlServer on its own loop in a thread, so blocking clients can call it from tests."""

    def __init__(self, cluster: FakeCluster, token: str = "") -> None:
        self.loop = asyncio.new_event_loop()
        self.server = ControlServer(cluster, "127.0.0.1", 0, token=token)
        self.thread = threading.Thread(target=self.loop.run_forever, name="control", daemon=True)
        self.thread.start()
        self.call(self.server.start())

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def server(cluster: FakeCluster) -> Iterator[ServerThread]:
    s = ServerThread(cluster)
    yield s
    s.close()


@pytest.fixture
def client(server: ServerThread) -> ControlClient:
    return ControlClient(server.server.url)


def raw(server: ServerThread, method: str, path: str, data: bytes | None = None,
        headers: dict[str, str] | None = None) -> tuple[int, dict]:
    """A request as `ctl` sends it (state changes as application/json), with `headers` on top."""
    json_type = {"Content-Type": "application/json"} if method != "GET" else {}
    request = urllib.request.Request(server.server.url + path, data=data, method=method,
                                     headers={**json_type, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def run_ctl(capsys, server: ServerThread, *argv: str) -> tuple[int, str, str]:
    code = ctl.main(["--url", server.server.url, *argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- the Python client ---------------------------------------------------------------------------

def test_brokers_stop_start(client: ControlClient, cluster: FakeCluster):
    assert [b["id"] for b in client.brokers()] == [1, 2, 3]
    stopped = client.stop_broker(1)
    assert stopped["alive"] is False and cluster.loop_thread == "control"
    now = {b["id"]: b for b in client.brokers()}
    assert now[2]["controller"] and now[2]["controller_epoch"] == 2
    assert client.start_broker(1)["alive"] is True


def test_broker_errors(client: ControlClient):
    with pytest.raises(ControlError) as unknown:
        client.stop_broker(9)
    assert (unknown.value.status, unknown.value.message) == (404, "unknown broker 9")
    with pytest.raises(ControlError) as conflict:
        client.start_broker(2)
    assert (conflict.value.status, conflict.value.message) == (409, "broker 2 is already running")


def test_partitions_and_replication(client: ControlClient):
    assert [p["partition"] for p in client.partitions()] == [0, 1]
    assert client.partitions("events")[0]["replicas_state"][0]["log_end_offset"] == 10
    assert client.pause_replication(3) == {"broker": 3, "replication": "paused"}
    assert client.partitions("events")[0]["isr"] == [1, 2]
    client.resume_replication(3)
    assert client.partitions("events")[0]["isr"] == [1, 2, 3]
    with pytest.raises(ControlError, match="404: unknown topic nope"):
        client.partitions("nope")
    with pytest.raises(ControlError, match="404: unknown broker 7"):
        client.pause_replication(7)


def test_elect_preferred_leaders(client: ControlClient, cluster: FakeCluster, capsys):
    assert [p["partition"] for p in client.elect_preferred_leaders()] == [0, 1]
    assert cluster.elections == 1
    assert ctl.main(["--url", client.url, "elect-leaders"]) == 0
    assert "PREFERRED" in capsys.readouterr().out
    assert cluster.elections == 2
    for broker_id in (1, 2, 3):
        cluster.alive[broker_id] = False
    with pytest.raises(ControlError, match="409: there is no controller right now"):
        client.elect_preferred_leaders()


def test_faults_round_trip(client: ControlClient, cluster: FakeCluster):
    a = client.add_fault(1, "produce", partition=("events", 0), error="NOT_LEADER_OR_FOLLOWER",
                         count=2)
    b = client.add_fault(2, "Fetch", drop_response=True)
    client.add_fault(2, "Metadata", disconnect=True)
    client.add_fault(3, 2, delay_ms=50)
    assert (a["api"], a["partition"], a["error"], a["remaining"]) == ("Produce", "events:0", 6, 2)
    assert [f["action"] for f in client.faults()] == ["error", "drop_response", "disconnect",
                                                      "delay_ms"]
    assert [f.id for f in cluster.faults.list()] == [f["id"] for f in client.faults()]
    assert client.clear_faults(id=b["id"]) == 1
    assert client.clear_faults(broker=2) == 1
    assert client.clear_faults() == 2
    assert client.faults() == []


@pytest.mark.parametrize("kwargs, status, message", [
    ({"broker": 9, "api": "Produce", "disconnect": True}, 404, "unknown broker 9"),
    ({"broker": 1, "api": "Nope", "disconnect": True}, 400, "unknown API 'Nope'"),
    ({"broker": 1, "api": "Produce"}, 400, "exactly one of"),
    ({"broker": 1, "api": "Produce", "error": 6, "disconnect": True}, 400, "exactly one of"),
    ({"broker": 1, "api": "Produce", "error": "BOGUS"}, 400, "unknown error 'BOGUS'"),
    ({"broker": 1, "api": "Produce", "delay_ms": -5}, 400, "delay_ms must be"),
    ({"broker": 1, "api": "Produce", "partition": "events", "disconnect": True}, 400,
     "partition must look like TOPIC:N"),
    ({"broker": 1, "api": "Metadata", "partition": "t:0", "disconnect": True}, 400,
     "do not address partitions"),
])
def test_bad_fault_specs(client: ControlClient, kwargs, status, message):
    with pytest.raises(ControlError) as err:
        client.add_fault(**kwargs)
    assert err.value.status == status and message in err.value.message
    assert client.faults() == []


def test_clear_unknown_fault(client: ControlClient):
    with pytest.raises(ControlError, match="404: no fault with id 42"):
        client.clear_faults(id=42)


def test_purgatory(client: ControlClient):
    assert client.purgatory()["brokers"]["1"]["produce"]["completed"] == 3


def test_unreachable_api():
    with pytest.raises(ControlError) as err:
        ControlClient("http://127.0.0.1:9", timeout=2).brokers()
    assert err.value.status is None and "cannot reach the control API" in err.value.message


# --- raw HTTP: what the client cannot send -------------------------------------------------------

@pytest.mark.parametrize("method, path, data, status, message", [
    ("POST", "/faults", b"{not json", 400, "not valid JSON"),
    ("POST", "/faults", b"[1, 2]", 400, "must be a JSON object"),
    ("POST", "/faults", b'{"broker": 1}', 400, "a fault needs 'api'"),
    ("POST", "/faults", b'{"broker": "1", "api": "Produce", "disconnect": true}', 400,
     "broker must be an integer"),
    ("POST", "/faults", b'{"broker": 1, "api": "Produce", "disconnect": "yes"}', 400,
     "disconnect must be true or false"),
    ("POST", "/faults", b'{"broker": 1, "api": "Produce", "disconect": true}', 400,
     "unknown fault field(s): disconect"),
    ("POST", "/brokers/abc/stop", None, 400, "broker id must be an integer"),
    ("DELETE", "/faults?id=x", None, 400, "fault id must be an integer"),
    ("GET", "/partitions?topic=", None, 400, "topic must not be empty"),
    ("GET", "/nowhere", None, 404, "no route GET /nowhere"),
    ("PUT", "/brokers", b"{}", 405, "method PUT not allowed on /brokers"),
])
def test_bad_requests(server: ServerThread, method, path, data, status, message):
    got_status, body = raw(server, method, path, data)
    assert got_status == status and message in body["error"]


def test_index_lists_routes(server: ServerThread):
    status, body = raw(server, "GET", "/")
    assert status == 200 and "POST /faults" in body["routes"]


def test_cluster_bug_is_a_json_500(server: ServerThread, cluster: FakeCluster):
    def broken() -> dict:
        raise RuntimeError("boom")
    cluster.purgatory = broken  # type: ignore[method-assign]
    status, body = raw(server, "GET", "/purgatory")
    assert status == 500 and "RuntimeError: boom" in body["error"]
    assert raw(server, "GET", "/brokers")[0] == 200  # and the API goes on


# --- the CLI -------------------------------------------------------------------------------------

def test_ctl_brokers_table(capsys, server: ServerThread):
    code, out, _ = run_ctl(capsys, server, "brokers")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["ID", "ADDRESS", "ALIVE", "CONTROLLER",
                                              "CONTROLLER_EPOCH"]
    assert lines[1].split() == ["1", "127.0.0.1:9092", "yes", "*", "1"]


def test_ctl_broker_stop_start(capsys, server: ServerThread, cluster: FakeCluster):
    assert run_ctl(capsys, server, "broker", "stop", "2")[:2] == (0, "broker 2 stopped\n")
    assert cluster.alive[2] is False
    code, _, err = run_ctl(capsys, server, "broker", "stop", "2")
    assert (code, err) == (1, "kafka-sim ctl: broker 2 is already stopped\n")
    assert run_ctl(capsys, server, "broker", "start", "2")[:2] == (0, "broker 2 started\n")
    code, _, err = run_ctl(capsys, server, "broker", "start", "8")
    assert (code, err) == (1, "kafka-sim ctl: unknown broker 8\n")


def test_ctl_partitions_json(capsys, server: ServerThread):
    code, out, _ = run_ctl(capsys, server, "partitions", "events")
    assert code == 0 and [p["partition"] for p in json.loads(out)] == [0, 1]
    code, out, _ = run_ctl(capsys, server, "partitions")
    assert code == 0 and len(json.loads(out)) == 2


def test_ctl_replication(capsys, server: ServerThread, cluster: FakeCluster):
    assert run_ctl(capsys, server, "replication", "pause", "3")[0] == 0
    assert cluster.paused == {3}
    assert run_ctl(capsys, server, "replication", "resume", "3")[0] == 0
    assert cluster.paused == set()


def test_ctl_faults(capsys, server: ServerThread, cluster: FakeCluster):
    code, out, _ = run_ctl(capsys, server, "fault", "add", "--broker", "1", "--api", "Produce",
                           "--partition", "events:0", "--error", "6", "--count", "3")
    assert code == 0 and out == ("fault 1 added: broker 1 Produce on events:0: "
                                 "error 6 (NOT_LEADER_OR_FOLLOWER), 3 time(s)\n")
    for action in (["--drop-response"], ["--disconnect"], ["--delay-ms", "100"],
                   ["--error", "REQUEST_TIMED_OUT"]):
        assert run_ctl(capsys, server, "fault", "add", "--broker", "2", "--api", "fetch",
                       *action)[0] == 0
    code, out, _ = run_ctl(capsys, server, "fault", "list")
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["ID", "BROKER", "API", "PARTITION", "ACTION", "REMAINING", "HITS"]
    assert rows[1] == ["1", "1", "Produce", "events:0", "error", "6", "(NOT_LEADER_OR_FOLLOWER)",
                       "3", "0"]
    assert [r[4] for r in rows[2:]] == ["drop-response", "disconnect", "delay", "error"]
    assert cluster.faults.list()[-1].error_code == 7
    assert run_ctl(capsys, server, "fault", "clear", "--id", "2")[1] == "cleared 1 fault(s)\n"
    assert run_ctl(capsys, server, "fault", "clear")[1] == "cleared 4 fault(s)\n"
    code, _, err = run_ctl(capsys, server, "fault", "clear", "--id", "2")
    assert (code, err) == (1, "kafka-sim ctl: no fault with id 2\n")


def test_ctl_bad_fault_is_an_error(capsys, server: ServerThread):
    code, _, err = run_ctl(capsys, server, "fault", "add", "--broker", "1", "--api", "Nope",
                           "--disconnect")
    assert code == 1 and err.startswith("kafka-sim ctl: unknown API 'Nope'")


def test_ctl_purgatory_json(capsys, server: ServerThread):
    code, out, _ = run_ctl(capsys, server, "purgatory")
    assert code == 0 and json.loads(out)["timer"]["pending"] == 0


@pytest.mark.parametrize("argv", [
    ["fault", "add", "--broker", "1", "--api", "Produce"],  # no action
    ["fault", "add", "--broker", "1", "--api", "Produce", "--disconnect", "--delay-ms", "5"],
    ["broker", "stop", "x"],
    ["bogus"],
    [],
])
def test_ctl_usage_errors(capsys, argv):
    assert ctl.main(argv) == 2
    assert capsys.readouterr().err.startswith("kafka-sim ctl: ")


def test_ctl_url_from_environment(capsys, server: ServerThread, monkeypatch):
    monkeypatch.setenv("KAFKA_SIM_CONTROL_URL", server.server.url)
    assert ctl.main(["brokers"]) == 0
    monkeypatch.setenv("KAFKA_SIM_CONTROL_URL", "http://127.0.0.1:9")
    assert ctl.main(["brokers"]) == 1
    assert "cannot reach the control API" in capsys.readouterr().err


# --- binding -------------------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.com", ""])
def test_refuses_non_loopback(cluster: FakeCluster, host: str):
    with pytest.raises(RemoteBindRefused, match="control.allow.remote=true and a control.token"):
        ControlServer(cluster, host, 0)
    with pytest.raises(RemoteBindRefused, match="needs a control.token"):
        ControlServer(cluster, host, 0, allow_remote=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_accepts_loopback(cluster: FakeCluster, host: str):
    assert ControlServer(cluster, host, 0).host == host


async def test_allow_remote_binds_anywhere(cluster: FakeCluster):
    server = ControlServer(cluster, "0.0.0.0", 0, allow_remote=True, token="s3cret")
    await server.start()
    try:
        assert server.port > 0
    finally:
        await server.stop()
