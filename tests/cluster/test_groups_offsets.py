"""Committed offsets and group administration over raw requests: OffsetCommit/OffsetFetch in all
their forms, the records written to `__consumer_offsets` (Kafka's own key/value schemas),
loading a partition back (COORDINATOR_LOAD_IN_PROGRESS meanwhile), NOT_COORDINATOR after a move,
Describe/List/DeleteGroups, OffsetDelete and offset retention for empty groups."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from broker.coordinator.group.group_metadata_manager import OFFSETS_TOPIC
from protocol import group_records as gr
from protocol.errors import ErrorCode as E
from protocol.records import decode_batch, iter_batches
from tests.cluster.group_helpers import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    Member,
    group_state,
    start_cluster,
)
from tests.harness import until
from tests.integration.raw_client import RawClient


@pytest.fixture
async def cluster(tmp_path):
    cluster = await start_cluster(tmp_path)
    yield cluster
    await cluster.stop()


@pytest.fixture
async def client(cluster):
    client = await RawClient.connect(cluster.brokers[0].port)
    yield client
    await client.close()


def offsets_log_records(cluster) -> list:
    log_ = cluster.brokers[0].replica_manager.partitions[(OFFSETS_TOPIC, 0)].log
    data = log_.read(0, 1 << 20, max_offset=log_.log_end_offset).records
    return [gr.decode_record(r.key, r.value)
            for pos, _ in iter_batches(data) for r in decode_batch(data, pos)[1]]


async def simple_commit(client: RawClient, group: str, offsets: dict, version: int = 2) -> dict:
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": -1, "topics": [{"name": t, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_metadata": "meta"}]}
                for (t, p), o in offsets.items()]}
    response = await client.request(OFFSET_COMMIT, version, body)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def test_commit_and_fetch_every_form(cluster, client):
    assert await simple_commit(client, "simple", {("t", 0): 5, ("t", 1): 7}) == {
        ("t", 0): 0, ("t", 1): 0}
    assert await simple_commit(client, "simple", {("nope", 0): 1}) == {
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    v1 = await client.request(OFFSET_FETCH, 1, {"group_id": "simple", "topics": [
        {"name": "t", "partition_indexes": [0, 3]}]})
    assert [(p.partition_index, p.committed_offset, p.metadata)
            for p in v1.topics[0].partitions] == [(0, 5, "meta"), (3, -1, "")]
    everything = await client.request(OFFSET_FETCH, 7, {"group_id": "simple", "topics": None})
    assert sorted((p.partition_index, p.committed_offset) for p in everything.topics[0].partitions) \
        == [(0, 5), (1, 7)]
    v8 = await client.request(OFFSET_FETCH, 8, {"groups": [
        {"group_id": "simple", "topics": None},
        {"group_id": "never", "topics": [{"name": "t", "partition_indexes": [2]}]}]})
    assert [(g.group_id, g.error_code, [(p.partition_index, p.committed_offset)
                                        for t in g.topics for p in t.partitions]) for g in v8.groups] \
        == [("simple", 0, [(0, 5), (1, 7)]), ("never", 0, [(2, -1)])]
    empty_group = await client.request(OFFSET_FETCH, 6, {"group_id": "", "topics": None})
    assert empty_group.error_code == 0  # an empty group id is allowed here (old clients)


async def test_commits_are_kafka_records_and_survive_a_reload(cluster, client):
    port = cluster.brokers[0].port
    m = await Member.connect(port)
    await m.join()
    await m.sync({m.member_id: b"assignment"})
    assert await m.commit({("t", 0): 11, ("t", 2): 22}) == {("t", 0): 0, ("t", 2): 0}
    records = offsets_log_records(cluster)
    group_records = [r for r in records if isinstance(r, gr.GroupMetadataRecord)]
    commits = [r for r in records if isinstance(r, gr.OffsetCommitRecord)]
    assert [(r.topic, r.partition, r.value.offset) for r in commits] == [("t", 0, 11), ("t", 2, 22)]
    last = group_records[-1].value
    assert (last.protocol_type, last.generation, last.protocol, last.leader) == \
        ("consumer", 1, "range", m.member_id)
    assert [(x.member_id, x.assignment) for x in last.members] == [(m.member_id, b"assignment")]

    coordinator = cluster.brokers[0].group_coordinator
    coordinator.on_leadership(0, False)  # the partition moves away ...
    assert await m.heartbeat() == E.NOT_COORDINATOR
    assert (await m.join()).error_code == E.NOT_COORDINATOR
    coordinator.on_leadership(0, True)  # ... and comes back: read from the log again
    assert coordinator.handle_fetch_offsets("g", None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coordinator.handle_heartbeat("g", m.member_id, None, 1) == E.NONE  # answered blindly
    await until(lambda: coordinator.manager.owned == {0})
    group = coordinator.group("g")
    assert (group.state.value, group.generation_id, group.leader_id) == ("Stable", 1, m.member_id)
    assert group.members[m.member_id].assignment == b"assignment"
    assert coordinator.handle_fetch_offsets("g", [("t", 2)])[1][("t", 2)].offset == 22
    assert await m.heartbeat() == E.NONE  # the member carries on with its generation
    await m.close()


async def test_a_restarted_broker_loads_its_offsets_partition_before_any_group_request(cluster, client):
    """The group coordinator is built on first use, and at the latest when LeaderAndIsr makes the
    broker leader of an offsets partition: the committed offsets load without a client asking."""
    assert await simple_commit(client, "g", {("t", 1): 7}) == {("t", 1): E.NONE}
    await cluster.stop_broker(0)
    await cluster.start_broker(0)
    broker = cluster.brokers[0]
    await until(lambda: broker._group_coordinator is not None
                and broker._group_coordinator.manager.owned == {0})
    assert broker.group_coordinator.handle_fetch_offsets("g", [("t", 1)])[1][("t", 1)].offset == 7


async def test_describe_list_and_delete_groups(cluster, client):
    port = cluster.brokers[0].port
    m = await Member.connect(port)
    await m.join()
    await m.sync({m.member_id: b"a"})
    await m.commit({("t", 1): 3})
    await simple_commit(client, "offsets-only", {("t", 0): 1})
    described = await client.request(DESCRIBE_GROUPS, 5, {"groups": ["g", "missing"]})
    g, missing = described.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert [(x.member_id, x.member_metadata, x.member_assignment) for x in g.members] == [
        (m.member_id, b"sub", b"a")]
    assert (missing.error_code, missing.group_state) == (0, "Dead")
    listed = await client.request(LIST_GROUPS, 4, {"states_filter": []})
    assert sorted((x.group_id, x.group_state) for x in listed.groups) == [
        ("g", "Stable"), ("offsets-only", "Empty")]
    only_stable = await client.request(LIST_GROUPS, 5, {"states_filter": ["stable"],
                                                         "types_filter": ["classic"]})
    assert [x.group_id for x in only_stable.groups] == ["g"]
    deleted = await client.request(DELETE_GROUPS, 2, {"groups_names": ["g", "offsets-only", "x"]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("g", E.NON_EMPTY_GROUP), ("offsets-only", 0), ("x", E.GROUP_ID_NOT_FOUND)]
    assert cluster.brokers[0].group_coordinator.group("offsets-only") is None
    tombstones = [r for r in offsets_log_records(cluster) if r.value is None]
    assert {type(r).__name__ for r in tombstones} == {"OffsetCommitRecord", "GroupMetadataRecord"}

    def delete_body(partitions):
        return {"group_id": "g", "topics": [{"name": "t", "partitions": [
            {"partition_index": p} for p in partitions]}]}

    subscribed = await client.request(OFFSET_DELETE, 0, delete_body([1]))
    # The subscription bytes b"sub" are no consumer protocol: every topic counts as subscribed.
    assert subscribed.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC
    await m.client.request(13, 3, {"group_id": "g", "members": [{"member_id": m.member_id}]})
    await until(lambda: group_state(cluster) == "Empty")
    gone = await client.request(OFFSET_DELETE, 0, delete_body([1]))
    assert (gone.error_code, gone.topics[0].partitions[0].error_code) == (0, 0)
    assert cluster.brokers[0].group_coordinator.group("g") is None  # empty and offsetless: dead
    await m.close()


async def test_offsets_of_an_empty_group_expire_after_retention(cluster, client):
    coordinator = cluster.brokers[0].group_coordinator
    await simple_commit(client, "old", {("t", 0): 1})
    m = await Member.connect(cluster.brokers[0].port, group="live")
    await m.join()
    await m.sync({})
    await m.commit({("t", 3): 9})
    retention_ms = cluster.brokers[0].config["offsets.retention.minutes"] * 60_000
    now = coordinator.time_ms()
    assert await coordinator.cleanup_expired_offsets(now + retention_ms - 60_000) == 0
    # "old" has no protocol: its offsets expire retention after their commit; "live" is a
    # stable group whose subscription cannot be read, so its offsets stay.
    assert await coordinator.cleanup_expired_offsets(now + retention_ms + 1) == 1
    assert coordinator.group("old") is None
    assert coordinator.group("live").offsets
    fetched = await client.request(OFFSET_FETCH, 5, {"group_id": "old", "topics": None})
    assert fetched.topics == []
    await m.close()


async def test_commit_with_retention_time_writes_an_expire_timestamp(cluster, client):
    body = {"group_id": "r", "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": 1000, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 4, "committed_metadata": None}]}]}
    assert (await client.request(OFFSET_COMMIT, 4, body)).topics[0].partitions[0].error_code == 0
    [record] = [r for r in offsets_log_records(cluster) if isinstance(r, gr.OffsetCommitRecord)]
    assert record.value.expire_timestamp == record.value.commit_timestamp + 1000
    coordinator = cluster.brokers[0].group_coordinator
    assert await coordinator.cleanup_expired_offsets(record.value.commit_timestamp + 1000) == 1


async def test_clients_cannot_produce_to_the_offsets_topic_and_metadata_creates_it_internal(
    async_broker,
):
    from protocol.errors import ErrorCode
    from protocol.records import encode_batch
    from tests.integration.raw_client import RawClient
    from tests.integration.test_protocol_edges import METADATA, PRODUCE, produce_body

    client = await RawClient.connect(async_broker.port)
    response = await client.request(METADATA, 12, {"topics": [{"name": "__consumer_offsets"}]})
    assert response.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    cache = async_broker.metadata_cache
    assert await cache.wait_for(lambda s: cache.has_leaders("__consumer_offsets"), 10_000)
    info = cache.topic("__consumer_offsets")
    assert info.internal and info.configs["cleanup.policy"] == "compact"
    response = await client.request(PRODUCE, 9, produce_body(
        {("__consumer_offsets", 0): encode_batch([(b"k", b"v", [], 1)])}))
    assert response.responses[0].partition_responses[0].error_code == \
        ErrorCode.INVALID_TOPIC_EXCEPTION
    await client.close()


async def test_a_failed_load_answers_not_coordinator_and_a_new_election_loads_again(
        cluster, client, monkeypatch):
    from broker.coordinator.group.group_metadata_manager import GroupMetadataManager

    m = await Member.connect(cluster.brokers[0].port)
    await m.join()
    await m.sync({m.member_id: b"assignment"})
    assert await m.commit({("t", 0): 7}) == {("t", 0): 0}
    coordinator = cluster.brokers[0].group_coordinator
    manager = coordinator.manager
    coordinator.on_leadership(0, False)

    def undecodable(*_args):
        raise ValueError("injected: a record that does not decode")

    with monkeypatch.context() as patch:
        patch.setattr(GroupMetadataManager, "_replay", staticmethod(undecodable))
        coordinator.on_leadership(0, True)
        assert coordinator.handle_fetch_offsets("g", None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        await until(lambda: not manager.loading)  # the failed load is not left "loading" forever
    assert (manager.owned, manager.failed) == (set(), {0})
    assert coordinator.group("g") is None  # nothing half-loaded
    # Clients are told to look for the coordinator again, not to wait for a load that never ends.
    assert await m.heartbeat() == E.NOT_COORDINATOR
    fetched = await client.request(OFFSET_FETCH, 8, {"groups": [
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}]})
    assert fetched.groups[0].error_code == E.NOT_COORDINATOR
    listed = await client.request(LIST_GROUPS, 4, {"states_filter": []})
    assert listed.error_code == E.NONE

    coordinator.on_leadership(0, True)  # elected again: loaded again, this time fine
    await until(lambda: manager.owned == {0})
    assert manager.failed == set()
    assert coordinator.handle_fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 7
    assert await m.heartbeat() == E.NONE
    await m.close()


async def test_loading_decodes_in_a_worker_thread_chunk_by_chunk(cluster, monkeypatch):
    import threading

    from broker.coordinator.group import group_metadata_manager as gmm

    m = await Member.connect(cluster.brokers[0].port)
    await m.join()
    await m.sync({m.member_id: b"assignment"})
    for offset in range(5):
        assert await m.commit({("t", 0): offset, ("t", 1): 100 + offset}) == {
            ("t", 0): 0, ("t", 1): 0}
    coordinator = cluster.brokers[0].group_coordinator
    coordinator.on_leadership(0, False)

    monkeypatch.setattr(gmm, "LOAD_CHUNK_BYTES", 1)  # one batch per chunk
    loop_thread = threading.get_ident()
    chunk_threads: list[int] = []
    ticks: list[int] = []  # the loop's own work, interleaved with the chunks
    original = gmm.GroupMetadataManager._replay_chunk.__func__

    def replay_chunk(cls, data, *state):  # groups, offsets, pending transactional offsets
        chunk_threads.append(threading.get_ident())
        ticks.append(-1)
        return original(cls, data, *state)

    monkeypatch.setattr(gmm.GroupMetadataManager, "_replay_chunk", classmethod(replay_chunk))

    async def ticker():
        while coordinator.manager.loading or not ticks:
            ticks.append(1)
            await asyncio.sleep(0)

    ticking = asyncio.ensure_future(ticker())
    coordinator.on_leadership(0, True)
    await until(lambda: coordinator.manager.owned == {0})
    await ticking
    batches = sum(1 for _ in iter_batches(b"".join(
        coordinator.manager._chunks(0))))  # the same chunks, read again
    assert len(chunk_threads) == batches >= 6  # the group's record and five commits, one by one
    assert loop_thread not in chunk_threads  # decoded off the event loop
    chunks_at = [i for i, t in enumerate(ticks) if t == -1]
    assert all(1 in ticks[a:b] for a, b in itertools.pairwise(chunks_at))  # the loop ran between
    assert coordinator.handle_fetch_offsets("g", [("t", 1)])[1][("t", 1)].offset == 104
    assert coordinator.group("g").members[m.member_id].assignment == b"assignment"
    await m.close()
