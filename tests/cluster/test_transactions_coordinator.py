"""The transaction coordinator over the wire (raw protocol, one broker on the manual clock):
InitProducerId with a transactional id, AddPartitionsToTxn, EndTxn and its retries, fencing,
timeouts on the timer, DescribeTransactions/ListTransactions, TxnOffsetCommit, reload on restart."""

from __future__ import annotations

import asyncio

import pytest

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import iter_batches
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import create_topic
from timer import ManualClock

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 10, 22, 24, 25, 26
TXN_OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_TXNS, LIST_TXNS = 28, 9, 65, 66
OVERRIDES = {"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1",
             "group.initial.rebalance.delay.ms": "0"}
E = ErrorCode


@pytest.fixture
async def cluster(tmp_path):
    cluster = Cluster(cluster_config(tmp_path, OVERRIDES), 1, clock=ManualClock(1_000_000))
    await cluster.start()
    broker = cluster.brokers[0]
    # Timeouts and expiry follow the manual clock, as the timer that runs their checks does.
    broker.transaction_coordinator.time_ms = cluster.clock.now_ms
    broker.group_coordinator.time_ms = cluster.clock.now_ms
    await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 10_000)
    client = await RawClient.connect(broker.port)
    await create_topic(client, "t", 2)
    first = await client.request(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["x"]})
    assert first.coordinators[0].error_code == E.COORDINATOR_NOT_AVAILABLE  # creates the topic
    await until(lambda: broker.transaction_coordinator.manager.owned == {0: 0})
    found = await client.request(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["x"]})
    assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == (0, 0)
    await client.close()
    yield cluster
    await cluster.stop()


async def connect(cluster: Cluster) -> RawClient:
    return await RawClient.connect(cluster.brokers[0].port)


async def init(client: RawClient, tid: str, timeout_ms: int = 60_000,
               expected: tuple[int, int] = (-1, -1)):
    return await client.request(INIT_PRODUCER_ID, 4, {
        "transactional_id": tid, "transaction_timeout_ms": timeout_ms,
        "producer_id": expected[0], "producer_epoch": expected[1]})


async def add(client: RawClient, tid: str, pid: int, epoch: int, partitions) -> dict:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    response = await client.request(ADD_PARTITIONS, 3, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


async def end(client: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> int:
    response = await client.request(END_TXN, 3, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit})
    return response.error_code


async def describe(client: RawClient, tid: str):
    return (await client.request(DESCRIBE_TXNS, 0, {"transactional_ids": [tid]})).transaction_states[0]


async def state_becomes(client: RawClient, tid: str, state: str) -> None:
    for _ in range(2000):
        if (await describe(client, tid)).transaction_state == state:
            return
    raise AssertionError(f"{tid} never became {state}")


async def test_commit_abort_and_end_txn_retries(cluster):
    client = await connect(cluster)
    r = await init(client, "a")
    assert (r.error_code, r.producer_epoch) == (0, 0)
    pid = r.producer_id
    assert (await describe(client, "a")).transaction_state == "Empty"
    assert await end(client, "a", pid, 0, True) == E.INVALID_TXN_STATE  # nothing open
    assert await add(client, "a", pid, 0, [("t", 0), ("nope", 0)]) == {
        ("t", 0): E.OPERATION_NOT_ATTEMPTED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert await add(client, "a", pid, 0, [("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): 0}
    d = await describe(client, "a")
    assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, 0)
    assert [(x.topic, sorted(x.partitions)) for x in d.topics] == [("t", [0, 1])]
    assert d.transaction_start_time_ms == cluster.clock.now_ms()
    listed = await client.request(LIST_TXNS, 1, {"state_filters": ["Ongoing", "Bogus"],
                                                 "producer_id_filters": [], "duration_filter": -1})
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        ("a", "Ongoing")]
    assert list(listed.unknown_state_filters) == ["Bogus"]
    assert await end(client, "a", pid, 1, True) == E.PRODUCER_FENCED
    assert await end(client, "a", pid + 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert await end(client, "a", pid, 0, True) == 0
    await state_becomes(client, "a", "CompleteCommit")
    assert (await describe(client, "a")).topics == []
    assert await end(client, "a", pid, 0, True) == 0  # a retry of the completed commit
    assert await end(client, "a", pid, 0, False) == E.INVALID_TXN_STATE
    assert await add(client, "a", pid, 0, [("t", 1)]) == {("t", 1): 0}  # the next transaction
    assert await end(client, "a", pid, 0, False) == 0
    await state_becomes(client, "a", "CompleteAbort")
    assert await end(client, "a", pid, 0, False) == 0
    assert (await describe(client, "nobody")).error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    await client.close()


async def test_a_new_producer_fences_the_open_transaction(cluster):
    client = await connect(cluster)
    first = await init(client, "f")
    pid = first.producer_id
    assert await add(client, "f", pid, 0, [("t", 0)]) == {("t", 0): 0}
    assert (await init(client, "f")).error_code == E.CONCURRENT_TRANSACTIONS
    await state_becomes(client, "f", "CompleteAbort")
    assert (await describe(client, "f")).producer_epoch == 1  # the fence
    second = await init(client, "f")
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, pid, 2)
    assert await add(client, "f", pid, 0, [("t", 1)]) == {("t", 1): E.PRODUCER_FENCED}
    assert await end(client, "f", pid, 0, True) == E.PRODUCER_FENCED
    # KIP-360: the current producer may bump its own epoch; a stale one is fenced.
    assert (await init(client, "f", expected=(pid, 2))).producer_epoch == 3
    assert (await init(client, "f", expected=(pid, 1))).error_code == E.PRODUCER_FENCED
    await client.close()


async def test_timeouts_are_validated_and_an_expired_transaction_is_aborted(cluster):
    client = await connect(cluster)
    assert (await init(client, "h", timeout_ms=900_001)).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert (await init(client, "h", timeout_ms=0)).error_code == E.INVALID_TRANSACTION_TIMEOUT
    r = await init(client, "h", timeout_ms=5_000)
    pid = r.producer_id
    assert await add(client, "h", pid, 0, [("t", 0)]) == {("t", 0): 0}
    cluster.clock.advance(4_999)  # not yet past its timeout
    assert (await describe(client, "h")).transaction_state == "Ongoing"
    cluster.clock.advance(10_000 - 4_999)  # the abort check runs every 10 s
    await state_becomes(client, "h", "CompleteAbort")
    assert (await describe(client, "h")).producer_epoch == 1
    assert await end(client, "h", pid, 0, True) == E.PRODUCER_FENCED
    await client.close()


async def test_idle_transactional_ids_expire(cluster):
    client = await connect(cluster)
    await init(client, "idle")
    cluster.clock.advance(7 * 24 * 3600 * 1000)  # transactional.id.expiration.ms, one check later
    coordinator = cluster.brokers[0].transaction_coordinator
    await until(lambda: "idle" not in coordinator.manager.transactions)
    assert (await describe(client, "idle")).error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    await client.close()


async def test_state_survives_a_restart(cluster):
    client = await connect(cluster)
    pid = (await init(client, "r")).producer_id
    await add(client, "r", pid, 0, [("t", 0), ("t", 1)])
    await client.close()
    await cluster.stop_broker(0)
    await cluster.start_broker(0)
    broker = cluster.brokers[0]
    # Built on first use, and at the latest by LeaderAndIsr for `__transaction_state`: before any
    # request (the attribute, not the property, which would build it).
    await until(lambda: broker._transaction_coordinator is not None, steps=1_000_000)
    broker.transaction_coordinator.time_ms = cluster.clock.now_ms
    await until(lambda: 0 in broker.transaction_coordinator.manager.owned, steps=1_000_000)
    client = await connect(cluster)
    d = await describe(client, "r")
    assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, 0)
    assert sorted(p for x in d.topics for p in x.partitions) == [0, 1]
    assert await end(client, "r", pid, 0, True) == 0
    await state_becomes(client, "r", "CompleteCommit")
    await client.close()


async def offsets(client: RawClient, group: str, require_stable: bool):
    response = await client.request(OFFSET_FETCH, 7, {
        "group_id": group, "topics": [{"name": "t", "partition_indexes": [0]}],
        "require_stable": require_stable})
    p = response.topics[0].partitions[0]
    return p.committed_offset, p.error_code


async def txn_commit(client: RawClient, tid: str, pid: int, offset: int) -> int:
    response = await client.request(TXN_OFFSET_COMMIT, 3, {
        "transactional_id": tid, "group_id": "g", "producer_id": pid, "producer_epoch": 0,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    return response.topics[0].partitions[0].error_code


async def test_txn_offsets_become_visible_on_commit_only(cluster):
    client = await connect(cluster)
    await client.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})  # __consumer_offsets
    groups = cluster.brokers[0].group_coordinator.manager
    await until(lambda: groups.owned == {0})
    pid = (await init(client, "o")).producer_id
    added = await client.request(ADD_OFFSETS, 3, {
        "transactional_id": "o", "producer_id": pid, "producer_epoch": 0, "group_id": "g"})
    assert added.error_code == 0
    assert [(x.topic, list(x.partitions)) for x in (await describe(client, "o")).topics] == [
        ("__consumer_offsets", [0])]
    assert await txn_commit(client, "o", pid, 5) == 0
    assert await offsets(client, "g", False) == (-1, 0)
    assert await offsets(client, "g", True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert await end(client, "o", pid, 0, True) == 0
    await state_becomes(client, "o", "CompleteCommit")
    assert await offsets(client, "g", True) == (5, 0)
    await client.request(ADD_OFFSETS, 3, {
        "transactional_id": "o", "producer_id": pid, "producer_epoch": 0, "group_id": "g"})
    assert await txn_commit(client, "o", pid, 9) == 0
    assert await end(client, "o", pid, 0, False) == 0
    await state_becomes(client, "o", "CompleteAbort")
    assert await offsets(client, "g", True) == (5, 0)
    # The log replays the same way: the committed 5 stands, the aborted 9 is gone.
    await client.close()
    await cluster.stop_broker(0)
    await cluster.start_broker(0)
    await until(lambda: cluster.brokers[0].group_coordinator.manager.owned == {0}, steps=1_000_000)
    client = await connect(cluster)
    assert await offsets(client, "g", True) == (5, 0)
    await client.close()


async def test_exhausted_epochs_rotate_the_producer_id_and_verify_only_checks(cluster):
    client = await connect(cluster)
    pid = (await init(client, "x")).producer_id
    txn = cluster.brokers[0].transaction_coordinator.manager.transactions["x"]
    txn.producer_epoch = 32766  # exhausted, as after ~32k restarts of the producer
    rotated = await init(client, "x", expected=(pid, 32766))
    assert rotated.error_code == 0 and rotated.producer_id != pid and rotated.producer_epoch == 0
    retried = await init(client, "x", expected=(pid, 32766))  # the same answer to its retry
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (
        0, rotated.producer_id, 0)
    new = rotated.producer_id
    assert await add(client, "x", new, 0, [("t", 0)]) == {("t", 0): 0}
    verify = await client.request(ADD_PARTITIONS, 4, {"transactions": [{
        "transactional_id": "x", "producer_id": new, "producer_epoch": 0, "verify_only": True,
        "topics": [{"name": "t", "partitions": [0, 1]}]}]})
    [result] = verify.results_by_transaction
    assert {p.partition_index: p.partition_error_code
            for t in result.topic_results for p in t.results_by_partition} == {
        0: 0, 1: E.INVALID_TXN_STATE}
    listed = await client.request(LIST_TXNS, 1, {"state_filters": [], "producer_id_filters": [new],
                                                 "duration_filter": -1})
    assert [t.transactional_id for t in listed.transaction_states] == ["x"]
    await client.close()


async def test_a_prepared_commit_is_completed_after_a_restart(cluster):
    """The broker stops between PrepareCommit and the markers (the marker path is cut by a fault);
    started again, it reloads the prepared transaction and sends the markers."""
    client = await connect(cluster)
    pid = (await init(client, "p")).producer_id
    await add(client, "p", pid, 0, [("t", 0), ("t", 1)])
    cluster.faults.add(0, "WriteTxnMarkers", disconnect=True)
    assert await end(client, "p", pid, 0, True) == 0
    assert (await describe(client, "p")).transaction_state == "PrepareCommit"
    await client.close()
    await cluster.stop_broker(0)
    cluster.faults.clear()
    await cluster.start_broker(0)
    broker = cluster.brokers[0]
    await until(lambda: 0 in broker.transaction_coordinator.manager.owned, steps=1_000_000)
    client = await connect(cluster)
    await state_becomes(client, "p", "CompleteCommit")
    for p in (0, 1):  # one commit marker each (no data was written), appended after the restart
        log = broker.replica_manager.partitions[("t", p)].log
        [(_, header)] = list(iter_batches(log.read(0, 1 << 20).records))
        assert header.is_control and header.producer_id == pid
    await client.close()


async def test_txn_offset_commit_checks_the_member_of_kip_447(cluster):
    client = await connect(cluster)
    await client.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    await until(lambda: cluster.brokers[0].group_coordinator.manager.owned == {0})
    pid = (await init(client, "m")).producer_id
    await client.request(ADD_OFFSETS, 3, {
        "transactional_id": "m", "producer_id": pid, "producer_epoch": 0, "group_id": "g"})

    async def commit(member: str, generation: int, group: str = "g") -> int:
        response = await client.request(TXN_OFFSET_COMMIT, 3, {
            "transactional_id": "m", "group_id": group, "producer_id": pid, "producer_epoch": 0,
            "generation_id": generation, "member_id": member, "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        return response.topics[0].partitions[0].error_code

    assert await commit("someone", 3) == E.UNKNOWN_MEMBER_ID  # the group has no such member
    assert await commit("", -1, group="") == E.INVALID_GROUP_ID
    assert await commit("", -1) == 0  # a producer outside any group generation (v0-2 semantics)
    await client.close()


async def test_a_marker_arriving_while_the_offsets_partition_loads_is_not_lost(cluster):
    from broker.handlers.write_txn_markers import write_txn_markers

    client = await connect(cluster)
    await client.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    groups = cluster.brokers[0].group_coordinator
    await until(lambda: groups.manager.owned == {0})
    pid = (await init(client, "l")).producer_id
    await client.request(ADD_OFFSETS, 3, {
        "transactional_id": "l", "producer_id": pid, "producer_epoch": 0, "group_id": "g"})
    assert await txn_commit(client, "l", pid, 4) == 0
    groups.on_leadership(0, False)
    groups.on_leadership(0, True)
    for _ in range(3):  # the load has read where the log ends and decodes in a worker thread
        await asyncio.sleep(0)
    assert groups.manager.loading  # ... when the marker comes in
    await write_txn_markers(cluster.brokers[0].services, [{
        "producer_id": pid, "producer_epoch": 0, "transaction_result": True,
        "topics": [{"name": "__consumer_offsets", "partition_indexes": [0]}],
        "coordinator_epoch": 0}])
    await until(lambda: groups.manager.owned == {0})
    assert await offsets(client, "g", True) == (4, 0)
    await client.close()


async def test_a_later_plain_commit_wins_over_an_earlier_transactional_one(cluster):
    client = await connect(cluster)
    await client.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    groups = cluster.brokers[0].group_coordinator
    await until(lambda: groups.manager.owned == {0})
    pid = (await init(client, "w")).producer_id
    await client.request(ADD_OFFSETS, 3, {
        "transactional_id": "w", "producer_id": pid, "producer_epoch": 0, "group_id": "g"})
    assert await txn_commit(client, "w", pid, 5) == 0  # in the log first
    plain = await client.request(8, 8, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    assert plain.topics[0].partitions[0].error_code == 0
    assert await end(client, "w", pid, 0, True) == 0
    await state_becomes(client, "w", "CompleteCommit")
    assert await offsets(client, "g", True) == (7, 0)  # Kafka orders them by their log offsets
    groups.on_leadership(0, False)
    groups.on_leadership(0, True)
    await until(lambda: groups.manager.owned == {0})
    assert await offsets(client, "g", True) == (7, 0)  # and so does the replay
    await client.close()


async def test_load_in_progress_then_not_coordinator(cluster):
    coordinator = cluster.brokers[0].transaction_coordinator
    coordinator.on_leadership(0, False, -1)
    assert (await coordinator.handle_init_producer_id("n", 1000, None))[0] == E.NOT_COORDINATOR
    coordinator.on_leadership(0, True, 1)  # loads in a task: nothing answered until it ran
    assert (await coordinator.handle_init_producer_id("n", 1000, None))[0] \
        == E.COORDINATOR_LOAD_IN_PROGRESS
    assert (await coordinator.handle_end_txn("n", 0, 0, True))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await until(lambda: coordinator.manager.owned == {0: 1})
    error, _, epoch = await coordinator.handle_init_producer_id("n", 1000, None)
    assert (error, epoch) == (0, 0)


async def test_clients_before_kip_588_are_told_invalid_producer_epoch(cluster):
    client = await connect(cluster)
    pid = (await init(client, "k")).producer_id
    await init(client, "k")  # epoch 1: epoch 0 is fenced
    for version, expected in ((1, E.INVALID_PRODUCER_EPOCH), (2, E.PRODUCER_FENCED)):
        response = await client.request(END_TXN, version, {
            "transactional_id": "k", "producer_id": pid, "producer_epoch": 0, "committed": True})
        assert response.error_code == expected, version
    for version, expected in ((3, E.INVALID_PRODUCER_EPOCH), (4, E.PRODUCER_FENCED)):
        response = await client.request(INIT_PRODUCER_ID, version, {
            "transactional_id": "k", "transaction_timeout_ms": 1000, "producer_id": pid,
            "producer_epoch": 5})
        assert response.error_code == expected, version
    await client.close()


async def test_a_lost_marker_response_is_retried(cluster):
    """The leader appends the marker but its answer is lost: the coordinator sends it again, the
    leader appends a second marker (as Kafka's would), and the transaction completes."""
    client = await connect(cluster)
    pid = (await init(client, "d")).producer_id
    await add(client, "d", pid, 0, [("t", 0)])
    fault = cluster.faults.add(0, "WriteTxnMarkers", drop_response=True, count=1)
    assert await end(client, "d", pid, 0, True) == 0
    await state_becomes(client, "d", "CompleteCommit")
    assert fault.hits == 1
    log = cluster.brokers[0].replica_manager.partitions[("t", 0)].log
    headers = [h for _, h in iter_batches(log.read(0, 1 << 20).records)]
    assert [(h.is_control, h.producer_id) for h in headers] == [(True, pid), (True, pid)]
    await client.close()


async def test_a_coordinator_still_leading_in_a_newer_epoch_keeps_its_state(cluster):
    """A leader epoch bump that leaves this broker the leader (an ISR change, another broker's
    session expiry) does not reload the partition: a transaction goes on, and an append in
    flight is not answered NOT_COORDINATOR (the simulator's seed 28 at --rate 12 left a
    transaction hanging when a reload read an unreplicated AddPartitions record as written)."""
    client = await connect(cluster)
    coordinator = cluster.brokers[0].transaction_coordinator
    pid = (await init(client, "stay")).producer_id
    await add(client, "stay", pid, 0, [("t", 0)])
    partition = coordinator.manager.partition_for("stay")
    epoch = coordinator.manager.owned[partition]
    coordinator.on_leadership(partition, True, epoch + 5)
    assert coordinator.manager.owned[partition] == epoch and not coordinator.manager.loading
    assert await end(client, "stay", pid, 0, True) == 0  # no COORDINATOR_LOAD_IN_PROGRESS
    await state_becomes(client, "stay", "CompleteCommit")
    await client.close()
