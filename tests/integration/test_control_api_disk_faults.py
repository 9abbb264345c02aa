"""The control API's disk faults over real HTTP: POST/GET/DELETE /disk-faults through ControlClient,
raw requests and `kafka-sim ctl disk-fault`, each refusal a 4xx with a message. The faults are the
storage layer's own DiskFaults behind the in-memory cluster of tests/integration/test_control_api.py."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from broker.control.control_client import ControlClient, ControlError
from storage.disk_faults import DiskFaults
from tests.integration.test_control_api import FakeCluster, ServerThread, raw, run_ctl


class DiskFakeCluster(FakeCluster):
    """FakeCluster with a DiskFaults per broker, as the real ClusterContext keeps them."""

    def __init__(self) -> None:
        super().__init__()
        self.disks: dict[int, DiskFaults] = {}
        self._ids = itertools.count(1)

    def add_disk_fault(self, broker_id: int, operation: str, errno: int | str, *,
                       after_bytes: int | None = None, after_ops: int | None = None,
                       files: list[str] | None = None, log_dir: str | None = None) -> dict:
        self._known(broker_id)
        disk = self.disks.setdefault(broker_id, DiskFaults(self._ids))
        fault = disk.add(operation, errno, after_bytes=after_bytes, after_ops=after_ops,
                         files=files, log_dir=log_dir)
        return {"broker": broker_id, **fault.to_dict()}

    def disk_faults(self) -> list[dict]:
        return [{"broker": b, **f.to_dict()} for b, d in sorted(self.disks.items())
                for f in d.list()]

    def clear_disk_faults(self, fault_id: int | None, broker_id: int | None) -> int:
        return sum(d.clear(fault_id) for b, d in self.disks.items()
                   if broker_id is None or b == broker_id)


@pytest.fixture
def cluster() -> DiskFakeCluster:
    return DiskFakeCluster()


@pytest.fixture
def server(cluster: DiskFakeCluster) -> Iterator[ServerThread]:
    s = ServerThread(cluster)
    yield s
    s.close()


@pytest.fixture
def client(server: ServerThread) -> ControlClient:
    return ControlClient(server.server.url)


def test_disk_faults_round_trip(client: ControlClient, cluster: DiskFakeCluster):
    a = client.add_disk_fault(1, "write", "ENOSPC", after_bytes=100)
    b = client.add_disk_fault(2, "fsync", "EIO", after_ops=3)
    client.add_disk_fault(2, "write", 5)
    assert a == {"id": 1, "broker": 1, "operation": "write", "errno": "ENOSPC",
                 "after_bytes": 100, "after_ops": None, "hits": 0, "files": ["log"]}
    c = client.add_disk_fault(1, "fsync", "EIO", files=["index", "checkpoint"])
    assert c["files"] == ["checkpoint", "index"]
    assert client.add_disk_fault(1, "write", "EIO", files=["all"])["files"] == [
        "checkpoint", "cleaner", "index", "log"]
    assert client.clear_disk_faults(id=c["id"]) == 1 and client.clear_disk_faults(id=c["id"] + 1)
    assert [(f["broker"], f["operation"], f["errno"]) for f in client.disk_faults()] == [
        (1, "write", "ENOSPC"), (2, "fsync", "EIO"), (2, "write", "EIO")]
    assert cluster.disks[2].list()[0].after_ops == 3
    assert client.clear_disk_faults(id=b["id"]) == 1
    assert client.clear_disk_faults(broker=1) == 1
    assert client.clear_disk_faults() == 1
    assert client.disk_faults() == []
    with pytest.raises(ControlError, match="404: no disk fault with id 1"):
        client.clear_disk_faults(id=1)


@pytest.mark.parametrize("kwargs, status, message", [
    ({"broker": 9, "operation": "write", "errno": "EIO"}, 404, "unknown broker 9"),
    ({"broker": 1, "operation": "read", "errno": "EIO"}, 400, "operation must be write or fsync"),
    ({"broker": 1, "operation": "write", "errno": "EWHAT"}, 400, "errno must be a name"),
    ({"broker": 1, "operation": "fsync", "errno": "EIO", "after_bytes": 1}, 400,
     "after_bytes applies to write faults only"),
    ({"broker": 1, "operation": "write", "errno": "EIO", "after_ops": -2}, 400,
     "after_ops must be a non-negative integer"),
    ({"broker": 1, "operation": "write", "errno": "EIO", "files": ["segments"]}, 400,
     "file kind must be one of log, index, checkpoint, cleaner or all, not 'segments'"),
    ({"broker": 1, "operation": "write", "errno": "EIO", "files": "index"}, 400,
     "files must be a list of file kinds"),
    ({"broker": 1, "operation": "write", "errno": "EIO", "files": []}, 400,
     "files must name at least one file kind"),
])
def test_bad_disk_fault_specs(client: ControlClient, kwargs, status, message):
    with pytest.raises(ControlError) as err:
        client.add_disk_fault(**kwargs)
    assert err.value.status == status and message in err.value.message
    assert client.disk_faults() == []


@pytest.mark.parametrize("method, path, data, status, message", [
    ("POST", "/disk-faults", b'{"broker": 1, "operation": "write"}', 400,
     "a disk fault needs 'errno'"),
    ("POST", "/disk-faults", b'{"broker": true, "operation": "write", "errno": "EIO"}', 400,
     "broker must be an integer"),
    ("POST", "/disk-faults", b'{"broker": 1, "operation": "write", "errno": "EIO", "count": 1}',
     400, "unknown disk fault field(s): count"),
    ("DELETE", "/disk-faults?broker=x", None, 400, "broker must be an integer"),
])
def test_bad_disk_fault_requests(server: ServerThread, method, path, data, status, message):
    got_status, body = raw(server, method, path, data)
    assert got_status == status and message in body["error"]
    assert "POST /disk-faults" in raw(server, "GET", "/")[1]["routes"]


def test_ctl_disk_faults(capsys, server: ServerThread, cluster: DiskFakeCluster):
    code, out, _ = run_ctl(capsys, server, "disk-fault", "add", "--broker", "1", "--operation",
                           "write", "--errno", "ENOSPC", "--after-bytes", "4096")
    assert (code, out) == (0, "disk fault 1 added: broker 1 write: ENOSPC after 4096 bytes, "
                              "until cleared\n")
    code, out, _ = run_ctl(capsys, server, "disk-fault", "add", "--broker", "3", "--operation",
                           "fsync", "--errno", "EIO", "--files", "index,checkpoint")
    assert (code, out) == (0, "disk fault 2 added: broker 3 fsync (checkpoint, index files): EIO, "
                              "until cleared\n")
    code, out, _ = run_ctl(capsys, server, "disk-fault", "list")
    assert [line.split() for line in out.splitlines()] == [
        ["ID", "BROKER", "OPERATION", "ERRNO", "AFTER_BYTES", "AFTER_OPS", "HITS", "FILES"],
        ["1", "1", "write", "ENOSPC", "4096", "-", "0", "log"],
        ["2", "3", "fsync", "EIO", "-", "-", "0", "checkpoint,index"]]
    code, _, err = run_ctl(capsys, server, "disk-fault", "add", "--broker", "1", "--operation",
                           "write", "--errno", "ENOPE")
    assert code == 1 and err.startswith("kafka-sim ctl: errno must be a name")
    assert run_ctl(capsys, server, "disk-fault", "clear", "--broker", "3")[1] == \
        "cleared 1 disk fault(s)\n"
    assert run_ctl(capsys, server, "disk-fault", "clear")[1] == "cleared 1 disk fault(s)\n"
    assert cluster.disk_faults() == []


def test_ctl_disk_fault_on_one_log_dir(capsys, server: ServerThread, cluster: DiskFakeCluster):
    code, out, _ = run_ctl(capsys, server, "disk-fault", "add", "--broker", "1", "--operation",
                           "write", "--errno", "EIO", "--log-dir", "/data/b/broker-1")
    assert (code, out) == (0, "disk fault 1 added: broker 1 in /data/b/broker-1 write: EIO, "
                              "until cleared\n")
    [fault] = cluster.disk_faults()
    assert fault["log_dir"] == "/data/b/broker-1"
    run_ctl(capsys, server, "disk-fault", "add", "--broker", "2", "--operation", "fsync",
            "--errno", "EIO")
    code, out, _ = run_ctl(capsys, server, "disk-fault", "list")
    assert [line.split()[-1] for line in out.splitlines()] == ["LOG_DIR", "/data/b/broker-1", "all"]
    got_status, body = raw(server, "POST", "/disk-faults",
                           b'{"broker": 1, "operation": "fsync", "errno": "EIO", "log_dir": "/x"}')
    assert got_status == 201 and body["log_dir"] == "/x" and body["id"] == 3
