"""MetadataStore: ZooKeeper semantics (versions, ephemerals, sequences, watches), persistence."""

import json
import os

import pytest
from structlog.testing import capture_logs

from broker.metadata.embedded_store import EmbeddedMetadataStore as MetadataStore
from broker.metadata.recipes import ChildrenWatch, DataWatch
from broker.metadata.store import (
    BadVersionError,
    MetadataStoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    WatchedEvent,
)
from tests.harness import watches_settled


@pytest.fixture
def store() -> MetadataStore:
    return MetadataStore(None)


class Recorder:
    """A watcher that records the events it gets."""

    def __init__(self) -> None:
        self.events: list[WatchedEvent] = []

    def __call__(self, event: WatchedEvent) -> None:
        self.events.append(event)

    @property
    def seen(self) -> list[tuple[str, str]]:
        return [(e.type, e.path) for e in self.events]


def now(call):
    """The result of one of the embedded store's calls, from a plain function: a one-shot watcher
    is called synchronously inside the write that fires it, and the embedded store answers at
    once (its coroutines never suspend)."""
    try:
        call.send(None)
    except StopIteration as done:
        return done.value
    call.close()
    raise AssertionError("the embedded store suspended")


# --- nodes, versions, conditional writes ---


async def test_root_exists_and_is_empty(store):
    assert (await store.get("/"))[0] == b""
    assert await store.get_children("/") == []
    with pytest.raises(NodeExistsError):
        await store.create("/")
    with pytest.raises(ValueError):
        await store.delete("/")


async def test_create_get_and_stat(store):
    assert await store.create("/brokers", b"x") == "/brokers"
    data, stat = await store.get("/brokers")
    assert data == b"x"
    assert (stat.version, stat.cversion, stat.ephemeral_owner, stat.data_length) == (0, 0, 0, 1)
    assert stat.czxid == stat.mzxid == 1
    assert await store.exists("/brokers") == stat
    assert await store.exists("/nope") is None


async def test_set_bumps_version_and_mzxid_only(store):
    await store.create("/a", b"1")
    stat = await store.set("/a", b"2")
    assert (stat.version, stat.czxid, stat.mzxid) == (1, 1, 2)
    assert (await store.set("/a", b"3", version=1)).version == 2
    assert (await store.get("/a"))[0] == b"3"


async def test_conditional_set_rejects_a_stale_version(store):
    await store.create("/controller_epoch", b"1")
    _, stat = await store.get("/controller_epoch")
    await store.set("/controller_epoch", b"2", version=stat.version)
    with pytest.raises(BadVersionError):
        await store.set("/controller_epoch", b"3", version=stat.version)
    assert (await store.get("/controller_epoch"))[0] == b"2"


async def test_zxid_is_global_and_monotonic(store):
    await store.create("/a")
    await store.create("/b")
    await store.set("/a", b"x")
    assert [(await store.exists(p)).mzxid for p in ("/b", "/a")] == [2, 3]


async def test_children_sorted_and_cversion_counts_creates_and_deletes(store):
    await store.create("/t")
    for name in ("c", "a", "b"):
        await store.create(f"/t/{name}")
    await store.delete("/t/b")
    assert await store.get_children("/t") == ["a", "c"]
    stat = await store.exists("/t")
    assert (stat.cversion, stat.num_children, stat.version) == (4, 2, 0)
    assert stat.pzxid == 5


async def test_create_errors(store):
    await store.create("/a")
    with pytest.raises(NodeExistsError):
        await store.create("/a")
    with pytest.raises(NoNodeError):
        await store.create("/x/y")
    for bad in ("a", "/a/", "//a", "/a/../b"):
        with pytest.raises(ValueError):
            await store.create(bad)
    with pytest.raises(TypeError):
        await store.create("/s", "not bytes")


async def test_makepath_creates_persistent_ancestors(store):
    assert await store.create("/brokers/topics/t1", b"{}", makepath=True) == "/brokers/topics/t1"
    assert (await store.get("/brokers/topics"))[0] == b""
    assert (await store.exists("/brokers")).ephemeral_owner == 0
    await store.ensure_path("/admin/delete_topics")
    await store.ensure_path("/admin/delete_topics")
    assert await store.get_children("/admin") == ["delete_topics"]


async def test_delete_version_and_not_empty(store):
    await store.create("/a/b/c", makepath=True)
    with pytest.raises(NotEmptyError):
        await store.delete("/a")
    with pytest.raises(BadVersionError):
        await store.delete("/a/b/c", version=3)
    with pytest.raises(NoNodeError):
        await store.delete("/zz")
    await store.delete("/a", recursive=True)
    assert await store.get_children("/") == []


async def test_reads_of_missing_nodes_raise(store):
    for call in (store.get, store.get_children, store.get_json):
        with pytest.raises(NoNodeError):
            await call("/missing")
    with pytest.raises(NoNodeError):
        await store.set("/missing", b"")


def test_errors_share_a_base():
    for error in (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError,
                  NoChildrenForEphemeralsError, SessionExpiredError):
        assert issubclass(error, MetadataStoreError)


# --- JSON and the admin dump ---


async def test_json_helpers(store):
    await store.create_json("/brokers/ids/1", {"host": "h", "port": 9092}, makepath=True)
    obj, stat = await store.get_json("/brokers/ids/1")
    assert obj == {"host": "h", "port": 9092}
    stat = await store.set_json("/brokers/ids/1", {"port": 9093}, version=stat.version)
    assert (await store.get_json("/brokers/ids/1"))[0] == {"port": 9093}
    assert stat.version == 1
    assert (await store.get_json("/brokers"))[0] is None


async def test_dump_decodes_json_text_and_binary(store):
    await store.create_json("/j", {"a": 1})
    await store.create("/t", b"plain text")
    await store.create("/b", b"\xff\x00")
    await store.create("/j/child")
    tree = store.dump()
    assert tree["children"]["j"]["data"] == {"a": 1}
    assert tree["children"]["j"]["children"]["child"]["data"] is None
    assert tree["children"]["t"]["data"] == "plain text"
    assert tree["children"]["b"]["data"] == {"hex": "ff00"}
    assert tree["children"]["j"]["stat"]["num_children"] == 1
    json.dumps(tree)  # serialisable as is


# --- sessions and ephemerals ---


async def test_ephemerals_vanish_with_their_session(store):
    await store.create("/brokers/ids", makepath=True)
    s1, s2 = store.create_session(), store.create_session()
    assert s1 != s2
    await store.create("/brokers/ids/1", b"b1", ephemeral=True, session=s1)
    await store.create("/brokers/ids/2", b"b2", ephemeral=True, session=s2)
    assert (await store.exists("/brokers/ids/1")).ephemeral_owner == s1
    await store.close_session(s1)
    assert await store.get_children("/brokers/ids") == ["2"]
    await store.close_session(s1)  # closing twice is harmless
    with pytest.raises(SessionExpiredError):
        await store.create("/brokers/ids/1", ephemeral=True, session=s1)


async def test_ephemeral_requires_a_live_session(store):
    with pytest.raises(SessionExpiredError):
        await store.create("/e", ephemeral=True, session=42)
    with pytest.raises(ValueError):
        await store.create("/e", ephemeral=True)
    with pytest.raises(ValueError):
        await store.create("/e", session=store.create_session())


async def test_ephemerals_cannot_have_children(store):
    session = store.create_session()
    await store.create("/controller", ephemeral=True, session=session)
    with pytest.raises(NoChildrenForEphemeralsError):
        await store.create("/controller/x")
    with pytest.raises(NoChildrenForEphemeralsError):
        await store.create("/controller/x/y", makepath=True)
    assert await store.get_children("/controller") == []


async def test_deleting_an_ephemeral_by_hand_then_closing_the_session(store):
    session = store.create_session()
    await store.create("/e", ephemeral=True, session=session)
    await store.delete("/e")
    await store.close_session(session)
    assert await store.exists("/e") is None


# --- sequence nodes ---


async def test_sequence_suffix_comes_from_the_parent_cversion(store):
    await store.create("/q")
    assert await store.create("/q/n-", sequence=True) == "/q/n-0000000000"
    await store.create("/q/other")
    await store.delete("/q/other")
    assert await store.create("/q/n-", sequence=True) == "/q/n-0000000003"
    assert await store.create("/q/", sequence=True) == "/q/0000000004"
    assert await store.get_children("/q") == ["0000000004", "n-0000000000", "n-0000000003"]


async def test_ephemeral_sequential(store):
    await store.create("/election")
    session = store.create_session()
    path = await store.create("/election/c_", ephemeral=True, session=session, sequence=True)
    assert path == "/election/c_0000000000"
    await store.close_session(session)
    assert await store.create("/election/c_", sequence=True) == "/election/c_0000000002"


# --- one-shot watches ---


async def test_data_watch_fires_once_on_change(store):
    await store.create("/a")
    w = Recorder()
    await store.get("/a", watch=w)
    await store.set("/a", b"1")
    await store.set("/a", b"2")
    assert w.seen == [("CHANGED", "/a")]


async def test_data_watch_fires_on_delete(store):
    await store.create("/a")
    w = Recorder()
    await store.get("/a", watch=w)
    await store.delete("/a")
    assert w.seen == [("DELETED", "/a")]


async def test_exists_watch_fires_on_create(store):
    w = Recorder()
    assert await store.exists("/later", watch=w) is None
    await store.create("/later")
    await store.delete("/later")
    assert w.seen == [("CREATED", "/later")]


async def test_get_on_a_missing_node_leaves_no_watch(store):
    w = Recorder()
    with pytest.raises(NoNodeError):
        await store.get("/x", watch=w)
    with pytest.raises(NoNodeError):
        await store.get_children("/x", watch=w)
    await store.create("/x")
    assert w.events == []


async def test_child_watch_fires_on_child_create_and_delete_not_on_data(store):
    await store.create("/p")
    w = Recorder()
    await store.get_children("/p", watch=w)
    await store.set("/p", b"data")
    assert w.events == []
    await store.create("/p/c")
    await store.create("/p/d")
    assert w.seen == [("CHILD", "/p")]
    await store.get_children("/p", watch=w)
    await store.delete("/p/c")
    assert w.seen == [("CHILD", "/p"), ("CHILD", "/p")]


async def test_child_watch_fires_deleted_when_the_node_goes(store):
    await store.create("/p")
    w = Recorder()
    await store.get_children("/p", watch=w)
    await store.get("/p", watch=w)  # the same watcher on both tables fires once
    await store.delete("/p")
    assert w.seen == [("DELETED", "/p")]


async def test_closing_a_session_fires_watches(store):
    await store.create("/ids")
    session = store.create_session()
    await store.create("/ids/1", ephemeral=True, session=session)
    data_w, child_w = Recorder(), Recorder()
    await store.exists("/ids/1", watch=data_w)
    await store.get_children("/ids", watch=child_w)
    await store.close_session(session)
    assert data_w.seen == [("DELETED", "/ids/1")]
    assert child_w.seen == [("CHILD", "/ids")]


async def test_watchers_run_in_registration_order_after_the_change(store):
    await store.create("/a")
    calls = []
    await store.get("/a", watch=lambda e: calls.append(("first", now(store.get("/a"))[0])))
    await store.exists("/a", watch=lambda e: calls.append(("second", now(store.get("/a"))[0])))
    await store.set("/a", b"new")
    assert calls == [("first", b"new"), ("second", b"new")]


async def test_a_failing_watcher_does_not_break_the_store(store):
    await store.create("/a")
    w = Recorder()

    def boom(event):
        raise RuntimeError("watcher bug")

    await store.get("/a", watch=boom)
    await store.get("/a", watch=w)
    with capture_logs() as logs:
        assert (await store.set("/a", b"1")).version == 1
    assert w.seen == [("CHANGED", "/a")]
    assert [(e["log_level"], e["path"]) for e in logs] == [("error", "/a")]
    assert logs[0]["exc_info"]  # the traceback goes to the log


async def test_a_watcher_that_writes_sees_a_consistent_store(store):
    await store.create("/a")
    await store.create("/log")

    def append(event):
        now(store.create("/log/e-", sequence=True))
        now(store.get("/a", watch=append))

    await store.get("/a", watch=append)
    await store.set("/a", b"1")
    await store.set("/a", b"2")
    assert await store.get_children("/log") == ["e-0000000000", "e-0000000001"]


async def test_remove_watch(store):
    await store.create("/a")
    w = Recorder()
    await store.get("/a", watch=w)
    store.remove_watch("/a", w)
    await store.set("/a", b"1")
    assert w.events == []


# --- DataWatch and ChildrenWatch ---
# A recipe reads again in a task of its own: each change is let through (watches_settled) before
# the next, else a burst of changes would be one call with the latest data (as on ZooKeeper).


async def test_data_watch_recipe_follows_every_change(store):
    seen = []
    watch = await DataWatch(
        store, "/c", lambda data, stat: seen.append((data, stat and stat.version))).start()
    await store.create("/c", b"1")
    await watches_settled()
    await store.set("/c", b"2")
    await watches_settled()
    await store.delete("/c")
    await watches_settled()
    await store.create("/c", b"3")
    await watches_settled()
    watch.cancel()
    await store.set("/c", b"4")
    await watches_settled()
    assert seen == [(None, None), (b"1", 0), (b"2", 1), (None, None), (b"3", 0)]


async def test_data_watch_recipe_stops_when_fn_returns_false(store):
    await store.create("/c")
    seen = []

    def fn(data, stat):
        seen.append(data)
        return data != b"stop"

    watch = await DataWatch(store, "/c", fn).start()
    await store.set("/c", b"stop")
    await watches_settled()
    await store.set("/c", b"after")
    await watches_settled()
    assert seen == [b"", b"stop"]
    assert watch.stopped


async def test_data_watch_recipe_sees_a_transaction_once(store):
    await store.create("/c", b"0")
    seen = []
    await DataWatch(store, "/c", lambda data, stat: seen.append(data)).start()
    with store.transaction() as t:
        t.set("/c", b"1")
        t.set("/c", b"2")
    await watches_settled()
    await store.set("/c", b"3")
    await watches_settled()
    assert seen == [b"0", b"2", b"3"]


async def test_a_recipe_whose_first_call_fails_is_not_left_armed(store):
    await store.create("/c")
    calls = []

    def fn(data, stat):
        calls.append(data)
        raise RuntimeError

    with pytest.raises(RuntimeError):
        await DataWatch(store, "/c", fn).start()
    await store.set("/c", b"1")
    await watches_settled()
    assert calls == [b""]


async def test_children_watch_recipe_follows_children(store):
    await store.create("/brokers/ids", makepath=True)
    seen = []
    watch = await ChildrenWatch(store, "/brokers/ids", seen.append).start()
    session = store.create_session()
    await store.create("/brokers/ids/1", ephemeral=True, session=session)
    await watches_settled()
    await store.create("/brokers/ids/2")
    await watches_settled()
    await store.set("/brokers/ids", b"not a child change")
    await watches_settled()
    await store.close_session(session)
    await watches_settled()
    assert seen == [[], ["1"], ["1", "2"], ["2"]]
    watch.cancel()
    await store.delete("/brokers/ids/2")
    await watches_settled()
    assert seen[-1] == ["2"]


async def test_children_watch_recipe_stops_when_the_node_is_deleted(store):
    await store.create("/p")
    seen = []
    watch = await ChildrenWatch(store, "/p", seen.append).start()
    await store.delete("/p")
    await watches_settled()
    await store.create("/p")
    await store.create("/p/c")
    await watches_settled()
    assert seen == [[]]
    assert watch.stopped
    with pytest.raises(NoNodeError):
        await ChildrenWatch(store, "/missing", seen.append).start()


# --- transactions ---


async def test_transaction_applies_all_with_one_zxid(store):
    await store.create("/epoch", b"1")
    w = Recorder()
    await store.get("/epoch", watch=w)
    with store.transaction() as t:
        t.check("/epoch", 0)
        t.set("/epoch", b"2")
        t.create("/state/p0", b"leader", makepath=True)
    assert t.results[0] is True
    assert t.results[1].version == 1
    assert t.results[2] == "/state/p0"
    assert (await store.exists("/epoch")).mzxid == (await store.exists("/state/p0")).czxid == 2
    assert w.seen == [("CHANGED", "/epoch")]


async def test_transaction_is_all_or_nothing(store):
    await store.create("/epoch", b"1")
    await store.create("/gone")
    session = store.create_session()
    w = Recorder()
    await store.get("/epoch", watch=w)
    t = store.transaction()
    t.set("/epoch", b"2")
    t.delete("/gone")
    t.create("/new/deep", makepath=True)
    t.create("/eph", ephemeral=True, session=session)
    t.check("/epoch", 0)  # now at version 1: fails after four ops applied
    with pytest.raises(BadVersionError):
        t.commit()
    assert await store.get("/epoch") == (b"1", await store.exists("/epoch"))
    assert (await store.exists("/epoch")).version == 0
    assert await store.exists("/gone") is not None
    assert await store.exists("/new") is None
    assert await store.get_children("/") == ["epoch", "gone"]
    assert w.events == []
    await store.close_session(session)  # the rolled-back ephemeral is not tracked
    assert await store.create("/z") == "/z"
    assert (await store.exists("/z")).czxid == 3  # the failed transaction consumed no zxid


async def test_transaction_not_committed_when_the_block_raises(store):
    with pytest.raises(RuntimeError), store.transaction() as t:
        t.create("/a")
        raise RuntimeError
    assert await store.exists("/a") is None


# --- persistence ---


async def test_persistence_round_trip(tmp_path):
    path = tmp_path / "metadata"
    store = MetadataStore(path)
    await store.create_json("/brokers/topics/t", {"partitions": {"0": [1, 2]}}, makepath=True)
    await store.set_json("/brokers/topics/t", {"partitions": {"0": [2, 1]}})
    await store.create("/bin", b"\x00\xff")
    session = store.create_session()
    await store.create("/brokers/ids", makepath=True)
    await store.create("/brokers/ids/1", ephemeral=True, session=session)
    await store.create("/seq/n-", sequence=True, makepath=True)
    stat_before = await store.exists("/brokers/topics/t")
    store.close()

    reopened = MetadataStore(path)
    assert await reopened.get_json("/brokers/topics/t") == (
        {"partitions": {"0": [2, 1]}}, stat_before)
    assert (await reopened.get("/bin"))[0] == b"\x00\xff"
    assert await reopened.exists("/brokers/ids/1") is None
    assert await reopened.get_children("/brokers/ids") == []
    assert reopened.create_session() > session
    await reopened.create("/x")
    last_before = (await store.exists("/seq/n-0000000000")).czxid
    assert (await reopened.exists("/x")).czxid == last_before + 1
    assert await reopened.create("/seq/n-", sequence=True) == "/seq/n-0000000001"
    with pytest.raises(SessionExpiredError):
        await reopened.create("/e", ephemeral=True, session=session)
    reopened.close()


async def test_ephemerals_are_never_written(tmp_path):
    path = tmp_path / "metadata"
    store = MetadataStore(path)
    session = store.create_session()
    await store.create("/controller", b"secret-ephemeral", ephemeral=True, session=session)
    await store.create("/persistent", b"kept")
    store.close()
    written = (path / "journal").read_bytes()
    assert b"kept" not in written  # base64 in the records
    assert b"controller" not in written and b"secret" not in written
    assert MetadataStore(path)._last_session == session


async def test_a_temp_file_left_by_a_crash_is_ignored(tmp_path):
    path = tmp_path / "metadata"
    store = MetadataStore(path, min_roll_bytes=0)  # every write also rolls a snapshot
    await store.create("/kept", b"ok")
    store.close()
    (path / "snapshot.tmp").write_bytes(b"\x00\x00\x10\x00half a wri")
    store = MetadataStore(path)
    assert (await store.get("/kept"))[0] == b"ok"
    await store.create("/next")
    store.close()
    assert await MetadataStore(path).get_children("/") == ["kept", "next"]


async def test_a_failed_journal_write_fails_every_flush_after_it(tmp_path, monkeypatch):
    path = tmp_path / "metadata"
    store = MetadataStore(path)
    await store.create("/a", b"1")
    await store.flush()

    def crash(fd):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", crash)
    await store.set("/a", b"2")
    assert (await store.get("/a"))[0] == b"2"  # the loop's view is unaffected
    with pytest.raises(MetadataStoreError, match="disk gone"):
        await store.flush()
    monkeypatch.undo()
    await store.set("/a", b"3")  # nothing is appended after a record that may be torn
    with pytest.raises(MetadataStoreError):
        await store.flush()
    store.close()
    assert (await MetadataStore(path).get("/a"))[0] in (b"1", b"2")


def test_a_corrupt_snapshot_is_reported(tmp_path):
    path = tmp_path / "metadata"
    path.mkdir()
    (path / "snapshot").write_text("{not a snapshot")
    with pytest.raises(MetadataStoreError, match="corrupt metadata snapshot .* move it away"):
        MetadataStore(path)


async def test_in_memory_store_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = MetadataStore(None)
    await store.create("/a")
    store.create_session()
    assert list(tmp_path.iterdir()) == []


# --- batches (the ZooKeeper store pipelines them; this one answers at once) ---


async def test_batched_calls_answer_per_node(store):
    nodes = [(f"/t/partitions/{p}/state", b"%d" % p) for p in range(3)]
    assert await store.create_many(nodes, makepath=True) == [None] * 3
    again = await store.create_many([nodes[0], ("/t/new", b"x")])
    assert [type(e) for e in again] == [NodeExistsError, type(None)]
    read = await store.get_many([p for p, _ in nodes] + ["/missing"])
    assert [r[0] for r in read[:3]] == [b"0", b"1", b"2"] and read[3] is None
    written = await store.set_many([(nodes[0][0], b"a", 0), (nodes[1][0], b"b", 5),
                                    ("/missing", b"c", -1)])
    assert written[0].version == 1
    assert [type(w) for w in written[1:]] == [BadVersionError, NoNodeError]
