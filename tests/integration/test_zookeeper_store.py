"""The metadata store on a real ZooKeeper: the same interface as the embedded store (versions,
ephemerals, sequences, one-shot watches delivered on the event loop, the recipes), a chroot
created on first use, and a broker told when its session expired and when a new one is live."""

from __future__ import annotations

import asyncio
import threading

import pytest
from kazoo.client import KazooClient

from broker.metadata.recipes import ChildrenWatch, DataWatch
from broker.metadata.store import (
    BadVersionError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    WatchedEvent,
)
from broker.metadata.zookeeper_store import ZooKeeperMetadataStore
from broker.server.zookeeper_runner import free_port


@pytest.fixture
async def store(zk_connect):
    s = ZooKeeperMetadataStore(zk_connect, session_timeout_ms=4000)
    await s.start()
    yield s
    await s.close()


async def next_event(queue: asyncio.Queue, timeout: float = 10.0):
    return await asyncio.wait_for(queue.get(), timeout)


async def test_nodes_versions_and_errors(store):
    assert await store.create("/a", b"1") == "/a"
    data, stat = await store.get("/a")
    assert (data, stat.version) == (b"1", 0)
    assert (await store.set("/a", b"2", version=0)).version == 1
    with pytest.raises(BadVersionError):
        await store.set("/a", b"3", version=0)
    with pytest.raises(NodeExistsError):
        await store.create("/a")
    with pytest.raises(NoNodeError):
        await store.get("/missing")
    await store.create("/a/b/c", makepath=True)
    with pytest.raises(NotEmptyError):
        await store.delete("/a")
    await store.delete("/a", recursive=True)
    assert await store.exists("/a") is None
    first = await store.create("/seq/n-", sequence=True, makepath=True)
    second = await store.create("/seq/n-", sequence=True)
    assert first < second and first.startswith("/seq/n-")
    assert await store.get_children("/seq") == sorted(p.rsplit("/", 1)[1] for p in (first, second))


async def test_json_nodes_are_kafkas_compact_json(store):
    await store.create_json("/controller", {"version": 1, "brokerid": 2}, ephemeral=True)
    assert (await store.get("/controller"))[0] == b'{"version":1,"brokerid":2}'
    assert (await store.get_json("/controller"))[0] == {"version": 1, "brokerid": 2}


async def test_the_chroot_is_created_and_isolates(zookeeper, zk_connect):
    s = ZooKeeperMetadataStore(zk_connect)
    await s.start()
    await s.create("/only-here")
    await s.close()
    root = KazooClient(hosts=zookeeper.connect_string)
    root.start()
    try:
        chroot = "/" + zk_connect.split("/", 1)[1]
        assert root.exists(chroot + "/only-here") is not None
        assert root.exists("/only-here") is None
    finally:
        root.stop()
        root.close()


async def test_watches_run_on_the_event_loop_once(store):
    events: asyncio.Queue = asyncio.Queue()
    loop_thread = threading.get_ident()

    def watch(event: WatchedEvent) -> None:
        events.put_nowait((event, threading.get_ident()))

    assert await store.exists("/w", watch=watch) is None
    await store.create("/w", b"x")
    event, thread = await next_event(events)
    assert (event.type, event.path, thread) == ("CREATED", "/w", loop_thread)
    await store.set("/w", b"y")  # one-shot: no watch is armed any more
    await store.get("/w", watch=watch)
    await store.delete("/w")
    event, _ = await next_event(events)
    assert event.type == "DELETED"
    assert events.empty()


async def test_recipes_follow_children_and_data(store):
    children: asyncio.Queue = asyncio.Queue()
    data: asyncio.Queue = asyncio.Queue()
    await store.ensure_path("/brokers/ids")
    kids = await ChildrenWatch(store, "/brokers/ids",
                               lambda c: children.put_nowait(list(c))).start()
    node = await DataWatch(store, "/config", lambda d, _s: data.put_nowait(d)).start()
    assert await next_event(children) == []
    assert await next_event(data) is None
    await store.create("/brokers/ids/1", b"{}", ephemeral=True)
    await store.create("/config", b"v1")
    assert await next_event(children) == ["1"]
    assert await next_event(data) == b"v1"
    kids.cancel()
    node.cancel()
    await store.create("/brokers/ids/2", b"{}", ephemeral=True)
    await store.set("/config", b"v2")
    # a round trip after the changes: their events would be delivered by now
    await store.get("/config")
    await asyncio.sleep(0)
    assert children.empty() and data.empty()


async def test_ephemerals_vanish_with_the_session(zk_connect):
    owner = ZooKeeperMetadataStore(zk_connect)
    observer = ZooKeeperMetadataStore(zk_connect)
    await owner.start()
    await observer.start()
    try:
        session = owner.create_session()
        await owner.create("/brokers/ids/7", b"{}", ephemeral=True, session=session, makepath=True)
        gone: asyncio.Queue = asyncio.Queue()
        await observer.exists("/brokers/ids/7", watch=gone.put_nowait)
        await owner.close_session(session)
        assert (await next_event(gone)).type == "DELETED"
        assert await observer.get_children("/brokers/ids") == []
    finally:
        await owner.close()
        await observer.close()


async def test_an_expired_session_is_reported_and_replaced(zk_connect):
    store = ZooKeeperMetadataStore(zk_connect, session_timeout_ms=4000)
    await store.start()
    states: asyncio.Queue = asyncio.Queue()
    store.add_session_listener(states.put_nowait)
    rearmed: asyncio.Queue = asyncio.Queue()
    try:
        old_session = store.create_session()
        await store.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
        await store.exists("/elsewhere", watch=rearmed.put_nowait)
        # ZooKeeper's way to expire a session on purpose: a second client joins it, then closes.
        client_id = store._client.client_id
        intruder = KazooClient(hosts=zk_connect, client_id=client_id)
        intruder.start()
        intruder.stop()
        intruder.close()
        assert await next_event(states, 30) == "LOST"
        assert await next_event(states, 30) == "CONNECTED"
        assert store.create_session() != old_session
        # the ephemeral went with the old session
        assert await store.exists("/brokers/ids/1") is None
        assert (await next_event(rearmed)).type == "NONE"  # watchers re-read after a new session
        with pytest.raises(Exception, match="no longer"):
            await store.create("/brokers/ids/1", b"{}", ephemeral=True, session=old_session)
    finally:
        await store.close()


async def test_an_unreachable_zookeeper_is_one_clear_error():
    store = ZooKeeperMetadataStore(f"127.0.0.1:{free_port()}", connection_timeout_ms=500)
    with pytest.raises(ConnectionLossError, match="cannot reach ZooKeeper"):
        await store.start()


async def test_batched_calls_pipeline_and_answer_per_node(store):
    """get_many/create_many/set_many: one batch, per-node answers, the loop free meanwhile."""
    nodes = [(f"/batch/t/partitions/{p}/state", b"%d" % p) for p in range(300)]
    assert await store.create_many(nodes, makepath=True) == [None] * 300
    again = await store.create_many(nodes[:2] + [("/batch/new", b"x")])
    assert [type(e) for e in again] == [NodeExistsError, NodeExistsError, type(None)]
    read = await store.get_many([p for p, _ in nodes] + ["/batch/missing"])
    assert [r[0] for r in read[:300]] == [d for _, d in nodes] and read[300] is None
    assert all(r[1].version == 0 for r in read[:300])
    written = await store.set_many([(nodes[0][0], b"a", 0), (nodes[1][0], b"b", 7),
                                    ("/batch/missing", b"c", -1)])
    assert written[0].version == 1
    assert [type(w) for w in written[1:]] == [BadVersionError, NoNodeError]
    assert (await store.get(nodes[0][0]))[0] == b"a" and (await store.get(nodes[1][0]))[0] == b"1"
