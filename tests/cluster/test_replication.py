"""Replication in an embedded 3-broker cluster on the test's loop, time on the manual clock:
acks=-1 waits for the ISR, the high watermark follows the slowest ISR member, consumers never
read above it, and the ISR shrinks and expands as followers stall and catch up."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from broker.metadata.metadata_cache import MetadataSnapshot
from broker.server.cluster import Cluster
from protocol.errors import ErrorCode, KafkaError
from protocol.records import encode_batch, iter_batches
from tests.harness import cluster_config, led_here, until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import CREATE_TOPICS, FETCH, PRODUCE, produce_body
from timer import ManualClock

LAG_MS = 1_000


@pytest.fixture
async def cluster(tmp_path):
    clock = ManualClock(1_000_000)
    cluster = Cluster(cluster_config(tmp_path, {"replica.lag.time.max.ms": str(LAG_MS)}), 3,
                      clock=clock)
    await cluster.start()
    for broker in cluster.brokers.values():
        await broker.metadata_cache.wait_for(lambda s: len(s.brokers) == 3, 10_000)
    yield cluster
    await cluster.stop()


async def create(cluster: Cluster, name: str, configs: dict[str, str] | None = None):
    client = await RawClient.connect(cluster.brokers[0].port)
    response = await client.request(CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 3,
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 10_000})
    assert response.topics[0].error_code == 0, response
    await client.close()
    state = cluster.active_controller().states[(name, 0)]
    leader = cluster.brokers[state.leader]
    followers = [cluster.brokers[r] for r in state.replicas if r != state.leader]
    # CreateTopics answers once the receiving broker's metadata shows the leaders, as Kafka's;
    # the replicas apply their LeaderAndIsr (new logs made in a worker thread) on their own time
    await led_here(leader, name)
    await until(lambda: all((name, 0) in f.replica_manager.partitions for f in followers))
    return leader, followers


def partition(broker, name: str):
    return broker.replica_manager.partitions[(name, 0)]


async def caught_up(leader, followers, name: str) -> None:
    """Every follower hosts the partition (its LeaderAndIsr makes the log in a worker thread
    first), its log end offset equals the leader's and the HW covers it."""
    def hosted(broker):
        return broker.replica_manager.partitions.get((name, 0))

    await until(lambda: all(hosted(f) is not None
                            and hosted(f).log_end_offset == partition(leader, name).log_end_offset
                            for f in followers)
                and partition(leader, name).high_watermark == partition(leader, name).log_end_offset)


async def consumer_fetch(port: int, name: str, offset: int = 0):
    client = await RawClient.connect(port)
    response = await client.request(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "topics": [{"topic": name, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]})
    await client.close()
    return response.responses[0].partitions[0]


async def advance(cluster: Cluster, leader, active: int, total_ms: int, step_ms: int = 100) -> None:
    """Move the manual clock in steps, letting the `active` followers re-fetch between steps."""
    purgatory = leader.replica_manager.fetch_purgatory
    timer, clock = cluster.timer, cluster.clock

    def settled() -> bool:  # the reaper ran everything due, the followers re-parked, and the
        due = timer.next_expiration_ms()  # ISR changes it asked for are written and applied
        return (due is None or due > clock.now_ms()) and purgatory.delayed >= active \
            and not leader.replica_manager.isr_changes_in_flight

    for _ in range(total_ms // step_ms):
        clock.advance(step_ms)
        await until(settled)


async def test_acks_all_waits_for_every_isr_member_and_consumers_stay_below_hw(cluster):
    leader, followers = await create(cluster, "rep")
    for f in followers:
        f.replica_manager.pause_replication()
    producer = await RawClient.connect(leader.port)
    correlation_id = await producer.send(PRODUCE, 9, produce_body(
        {("rep", 0): encode_batch([(b"k", b"v", [], 1)])}, acks=-1))
    produce_purgatory = leader.replica_manager.produce_purgatory
    await until(lambda: produce_purgatory.delayed == 1)
    assert partition(leader, "rep").log_end_offset == 1
    assert partition(leader, "rep").high_watermark == 0
    seen = await consumer_fetch(leader.port, "rep")
    assert (seen.high_watermark, seen.records) == (0, b"")  # written, not yet committed

    followers[0].replica_manager.resume_replication()
    await until(lambda: partition(followers[0], "rep").log_end_offset == 1)
    for _ in range(100):
        await asyncio.sleep(0)
    assert produce_purgatory.delayed == 1  # one follower of two is not the whole ISR
    assert partition(leader, "rep").high_watermark == 0

    followers[1].replica_manager.resume_replication()
    response = await asyncio.wait_for(producer.receive(PRODUCE, 9, correlation_id), 10)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert partition(leader, "rep").high_watermark == 1
    seen = await consumer_fetch(leader.port, "rep")
    assert [h.base_offset for _, h in iter_batches(seen.records)] == [0]
    await caught_up(leader, followers, "rep")
    # Followers learn the new HW from their next fetch response: at the latest when their parked
    # fetch (replica.fetch.wait.max.ms) answers.
    cluster.clock.advance(500)
    await until(lambda: all(partition(f, "rep").high_watermark == 1 for f in followers))
    await producer.close()


async def test_isr_shrinks_and_expands_with_min_insync_replicas(cluster):
    leader, (f1, f2) = await create(cluster, "isr", {"min.insync.replicas": "2"})
    producer = await RawClient.connect(leader.port)

    async def produce(value: bytes, acks: int = -1) -> int:
        response = await producer.request(PRODUCE, 9, produce_body(
            {("isr", 0): encode_batch([(None, value, [], 1)])}, acks=acks))
        return response.responses[0].partition_responses[0].error_code

    assert await produce(b"all three") == ErrorCode.NONE
    await caught_up(leader, [f1, f2], "isr")

    f1.replica_manager.pause_replication()
    await advance(cluster, leader, active=1, total_ms=LAG_MS + 500)
    # Caught up, a paused follower is in sync however long it does not fetch (Kafka's isCaughtUp)
    assert sorted(partition(leader, "isr").isr) == sorted([leader.broker_id, f1.broker_id,
                                                           f2.broker_id])
    assert await produce(b"f1 lacks this", acks=1) == ErrorCode.NONE
    await advance(cluster, leader, active=1, total_ms=LAG_MS + 500)
    assert sorted(partition(leader, "isr").isr) == sorted([leader.broker_id, f2.broker_id])
    state = cluster.active_controller().states[("isr", 0)]
    assert sorted(state.isr) == sorted([leader.broker_id, f2.broker_id])  # the controller knows
    assert await produce(b"two of three") == ErrorCode.NONE  # min.insync.replicas=2 still holds

    f2.replica_manager.pause_replication()
    assert await produce(b"f2 lacks this", acks=1) == ErrorCode.NONE
    await advance(cluster, leader, active=0, total_ms=LAG_MS + 500)
    assert partition(leader, "isr").isr == [leader.broker_id]
    leo = partition(leader, "isr").log_end_offset
    assert await produce(b"refused") == ErrorCode.NOT_ENOUGH_REPLICAS
    assert partition(leader, "isr").log_end_offset == leo  # nothing appended

    f1.replica_manager.resume_replication()
    f2.replica_manager.resume_replication()
    await until(lambda: len(partition(leader, "isr").isr) == 3)
    assert await produce(b"back") == ErrorCode.NONE
    await caught_up(leader, [f1, f2], "isr")
    await producer.close()


async def test_isr_shrink_while_waiting_fails_with_not_enough_replicas_after_append(cluster):
    leader, (f1, f2) = await create(cluster, "after", {"min.insync.replicas": "3"})
    f1.replica_manager.pause_replication()
    producer = await RawClient.connect(leader.port)
    correlation_id = await producer.send(PRODUCE, 9, produce_body(
        {("after", 0): encode_batch([(None, b"x", [], 1)])}, acks=-1))
    await until(lambda: leader.replica_manager.produce_purgatory.delayed == 1)
    await advance(cluster, leader, active=1, total_ms=LAG_MS + 500)
    response = await asyncio.wait_for(producer.receive(PRODUCE, 9, correlation_id), 10)
    assert response.responses[0].partition_responses[0].error_code == \
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    await producer.close()


async def test_acks_all_times_out_with_request_timed_out(cluster):
    leader, followers = await create(cluster, "slow")
    for f in followers:
        f.replica_manager.pause_replication()
    producer = await RawClient.connect(leader.port)
    body = produce_body({("slow", 0): encode_batch([(None, b"x", [], 1)])}, acks=-1)
    body["timeout_ms"] = 300
    correlation_id = await producer.send(PRODUCE, 9, body)
    await until(lambda: leader.replica_manager.produce_purgatory.delayed == 1)
    cluster.clock.advance(300)
    response = await asyncio.wait_for(producer.receive(PRODUCE, 9, correlation_id), 10)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert leader.replica_manager.produce_purgatory.expired_count == 1
    await producer.close()


async def test_leader_failover_keeps_committed_records_and_old_leader_truncates(cluster):
    leader, followers = await create(cluster, "fail")
    producer = await RawClient.connect(leader.port)
    for i in range(5):
        response = await producer.request(PRODUCE, 9, produce_body(
            {("fail", 0): encode_batch([(None, b"c%d" % i, [], 1)])}, acks=-1))
        assert response.responses[0].partition_responses[0].error_code == 0
    await caught_up(leader, followers, "fail")
    # An append only the leader gets (followers paused): not committed, may be lost.
    for f in followers:
        f.replica_manager.pause_replication()
    await producer.request(PRODUCE, 9, produce_body(
        {("fail", 0): encode_batch([(None, b"uncommitted", [], 1)])}, acks=1))
    await producer.close()
    assert partition(leader, "fail").log_end_offset == 6
    old_epoch = cluster.active_controller().states[("fail", 0)].leader_epoch

    old_id = leader.broker_id
    await cluster.stop_broker(old_id)
    for f in followers:
        f.replica_manager.resume_replication()
    await until(lambda: cluster.active_controller() is not None
                and cluster.active_controller().states[("fail", 0)].leader not in (-1, old_id))
    state = cluster.active_controller().states[("fail", 0)]
    assert state.leader_epoch == old_epoch + 1
    new_leader = cluster.brokers[state.leader]
    await until(lambda: partition(new_leader, "fail").is_leader)
    seen = await consumer_fetch(new_leader.port, "fail")
    assert [h.base_offset for _, h in iter_batches(seen.records)] == [0, 1, 2, 3, 4]

    await cluster.start_broker(old_id)
    old = cluster.brokers[old_id]
    await until(lambda: ("fail", 0) in old.replica_manager.partitions
                and not partition(old, "fail").is_leader
                and partition(old, "fail").log_end_offset == 5)  # the divergent batch is gone
    await until(lambda: len(cluster.active_controller().states[("fail", 0)].isr) == 3)
    replicas = [cluster.brokers[r] for r in state.replicas]
    hw = partition(new_leader, "fail").high_watermark
    logs = [partition(b, "fail").log.read(0, 1 << 20, max_offset=hw).records for b in replicas]
    assert logs[0] == logs[1] == logs[2]  # identical up to the high watermark


async def test_controller_failover_bumps_the_epoch(cluster):
    first = cluster.active_controller()
    epoch = first.epoch
    await cluster.stop_broker(first.broker_id)
    await until(lambda: cluster.active_controller() is not None)
    second = cluster.active_controller()
    assert second.broker_id != first.broker_id
    assert second.epoch == epoch + 1
    assert cluster.controller_epoch() == epoch + 1
    for broker in cluster.brokers.values():
        if broker.running:
            await broker.metadata_cache.wait_for(
                lambda s: s.controller_id == second.broker_id and len(s.brokers) == 2, 10_000)
    # A decision from the old controller's epoch is refused.
    for stale in (lambda b: b.apply_leader_and_isr_now(epoch, [], {}),
                  lambda b: b.apply_update_metadata(MetadataSnapshot(controller_epoch=epoch))):
        with pytest.raises(KafkaError) as exc:
            stale(cluster.brokers[second.broker_id])
        assert exc.value.code == ErrorCode.STALE_CONTROLLER_EPOCH


async def test_leadership_returns_to_preferred_replicas(tmp_path):
    clock = ManualClock(1_000_000)
    overrides = {"leader.imbalance.check.interval.seconds": "60",
                 "replica.lag.time.max.ms": "3600000"}  # this test moves time in large steps
    cluster = Cluster(cluster_config(tmp_path, overrides), 3, clock=clock)
    await cluster.start()
    try:
        client = await RawClient.connect(cluster.brokers[0].port)
        response = await client.request(CREATE_TOPICS, 7, {"topics": [{
            "name": "balance", "num_partitions": 3, "replication_factor": 3}], "timeout_ms": 10_000})
        assert response.topics[0].error_code == 0
        await client.close()
        states = cluster.active_controller().states
        assert sorted(states[("balance", p)].leader for p in range(3)) == [0, 1, 2]

        def preferred_leading() -> list[bool]:
            live = cluster.active_controller().states
            return [live[("balance", p)].leader == live[("balance", p)].replicas[0]
                    for p in range(3)]

        victim = states[("balance", 0)].leader
        await cluster.stop_broker(victim)
        await until(lambda: cluster.active_controller() is not None and not all(preferred_leading()))
        await cluster.start_broker(victim)
        await until(lambda: all(len(s.isr) == 3 for s in cluster.active_controller().states.values()))
        assert not all(preferred_leading())  # nothing moves before the check interval
        clock.advance(60_000)
        await until(lambda: all(preferred_leading()))
    finally:
        await cluster.stop()


async def test_create_partitions_grows_a_topic_and_refuses_to_shrink(cluster):
    create_partitions = 37
    client = await RawClient.connect(cluster.brokers[0].port)
    response = await client.request(CREATE_TOPICS, 7, {"topics": [{
        "name": "grow", "num_partitions": 2, "replication_factor": 3}], "timeout_ms": 10_000})
    assert response.topics[0].error_code == 0

    async def grow(count: int, assignments=None, validate_only=False) -> tuple[int, str | None]:
        response = await client.request(create_partitions, 3, {
            "topics": [{"name": "grow", "count": count, "assignments": assignments}],
            "timeout_ms": 10_000, "validate_only": validate_only})
        result = response.results[0]
        return result.error_code, result.error_message

    assert await grow(5, validate_only=True) == (ErrorCode.NONE, None)
    assert cluster.brokers[0].metadata_cache.topic("grow").num_partitions == 2
    assert await grow(4) == (ErrorCode.NONE, None)
    states = cluster.active_controller().states
    assert [p for t, p in states if t == "grow"] == [0, 1, 2, 3]
    assert all(states[("grow", p)].leader >= 0 and len(states[("grow", p)].isr) == 3
               for p in (2, 3))
    code, message = await grow(3)
    assert code == ErrorCode.INVALID_PARTITIONS and "higher than the requested 3" in message
    assert (await grow(5, assignments=[{"broker_ids": [0, 0, 1]}]))[0] == \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert await grow(5, assignments=[{"broker_ids": [2, 0, 1]}]) == (ErrorCode.NONE, None)
    assert cluster.active_controller().states[("grow", 4)].leader == 2
    response = await client.request(create_partitions, 0, {
        "topics": [{"name": "nope", "count": 3, "assignments": None}], "timeout_ms": 1000})
    assert response.results[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await client.close()


async def follower_fetch(port: int, name: str, replica_id: int, offset: int, epoch: int):
    """A Fetch with `replica_id` set, as a follower (or a client pretending to be one) sends it."""
    client = await RawClient.connect(port)
    response = await client.request(FETCH, 12, {
        "replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "topics": [{"topic": name, "partitions": [
            {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
             "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    await client.close()
    return response.responses[0].partitions[0]


async def test_a_fetch_as_a_follower_moves_its_state_only_after_the_checks_and_the_read(cluster):
    leader, (f1, f2) = await create(cluster, "impostor")
    f1.replica_manager.pause_replication()
    producer = await RawClient.connect(leader.port)
    response = await producer.request(PRODUCE, 9, produce_body(
        {("impostor", 0): encode_batch([(b"k", b"v", [], 1)])}, acks=1))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    await producer.close()
    p = partition(leader, "impostor")
    await until(lambda: partition(f2, "impostor").log_end_offset == 1)
    assert (p.log_end_offset, p.high_watermark) == (1, 0)  # f1 is paused, still in the ISR
    before = dataclasses.replace(p.remote_replicas[f1.broker_id])
    epoch = p.leader_epoch

    refused = [
        (f1.broker_id, epoch + 1, 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (f1.broker_id, epoch, 5, ErrorCode.OFFSET_OUT_OF_RANGE),
        (42, epoch, 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # not a replica of the partition
        (leader.broker_id, epoch, 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # the leader itself
    ]
    for replica_id, current_epoch, offset, error in refused:
        answer = await follower_fetch(leader.port, "impostor", replica_id, offset, current_epoch)
        assert answer.error_code == error, (replica_id, current_epoch, offset)
        assert answer.records in (b"", None)
        assert p.remote_replicas[f1.broker_id] == before  # no LEO, no caught-up time
        assert p.high_watermark == 0
        assert set(p.remote_replicas) == {f1.broker_id, f2.broker_id}

    # A fetch that passes the checks and is read moves the follower, and the HW with it.
    answer = await follower_fetch(leader.port, "impostor", f1.broker_id, 1, epoch)
    assert answer.error_code == ErrorCode.NONE
    assert p.remote_replicas[f1.broker_id].log_end_offset == 1
    assert p.high_watermark == 1


async def test_a_fenced_leader_epoch_leaves_the_follower_state_alone(cluster):
    leader, (f1, f2) = await create(cluster, "fenced")
    await caught_up(leader, [f1, f2], "fenced")
    # A new leader epoch on the same leader (the controller re-elects it); fetches at the old one
    # are fenced.
    p = partition(leader, "fenced")
    state = cluster.active_controller().states[("fenced", 0)]
    bumped = dataclasses.replace(state, leader_epoch=state.leader_epoch + 1)
    leader.replica_manager.become_leader_or_follower([bumped], {"fenced": p.log.config})
    f1.replica_manager.pause_replication()
    before = dataclasses.replace(p.remote_replicas[f1.broker_id])
    answer = await follower_fetch(leader.port, "fenced", f1.broker_id, 0, state.leader_epoch)
    assert answer.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert p.remote_replicas[f1.broker_id] == before


async def test_a_parked_fetch_is_answered_fenced_when_its_leader_epoch_moves(cluster):
    """Kafka's DelayedFetch: a fetch parked at one leader epoch completes when the partition's
    epoch changes under it, answered FENCED_LEADER_EPOCH, though its leader stays the same (on
    the manual clock its max wait never passes: only the new epoch answers it)."""
    leader, (f1, f2) = await create(cluster, "epoch-moves")
    await caught_up(leader, [f1, f2], "epoch-moves")
    state = cluster.active_controller().states[("epoch-moves", 0)]
    client = await RawClient.connect(leader.port)
    parked = asyncio.ensure_future(client.request(FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 60_000, "min_bytes": 1, "max_bytes": 1 << 20,
        "topics": [{"topic": "epoch-moves", "partitions": [
            {"partition": 0, "current_leader_epoch": state.leader_epoch, "fetch_offset": 0,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}))
    await until(lambda: any(getattr(op, "params", None) is not None
                            and op.params.replica_id == -1  # ours, not a follower's
                            for op in leader.replica_manager._parked))
    p = partition(leader, "epoch-moves")
    bumped = dataclasses.replace(state, leader_epoch=state.leader_epoch + 1)
    leader.replica_manager.become_leader_or_follower([bumped], {"epoch-moves": p.log.config})
    response = await asyncio.wait_for(parked, 10)
    assert response.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    await client.close()


async def test_one_partition_failing_to_append_on_a_follower_does_not_stall_the_others(
        cluster, monkeypatch):
    from broker.replication import replica_fetcher
    from broker.replication.partition import Partition

    monkeypatch.setattr(replica_fetcher, "BACKOFF_S", 0.0)  # back off without real time
    # Two topics led by the same broker: one fetcher follows both.
    created = {name: await create(cluster, name) for name in ("iso-a", "iso-b", "iso-c", "iso-d")}
    by_leader: dict[int, list[str]] = {}
    for name, (leader, _) in created.items():
        by_leader.setdefault(leader.broker_id, []).append(name)
    bad, good = next(names for names in by_leader.values() if len(names) >= 2)[:2]
    leader, (follower, _) = created[bad]
    for name in (bad, good):
        await caught_up(*created[name], name)

    failing = True
    original = Partition.append_records_as_follower

    def append(self, records, *args):
        if failing and self.topic == bad and self.local_broker_id == follower.broker_id and records:
            raise OSError("injected: disk error")
        return original(self, records, *args)

    monkeypatch.setattr(Partition, "append_records_as_follower", append)
    producer = await RawClient.connect(leader.port)
    for name in (bad, good):
        response = await producer.request(PRODUCE, 9, produce_body(
            {(name, 0): encode_batch([(b"k", b"v", [], 1)])}, acks=1))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    await producer.close()
    fetcher = follower.replica_manager.fetchers[leader.broker_id]
    await until(lambda: fetcher.partitions[(bad, 0)].failures >= 2)
    await until(lambda: partition(follower, good).log_end_offset == 1)  # the other goes on
    assert partition(follower, bad).log_end_offset == 0

    failing = False  # the fault passes: the failed partition comes back after its backoff
    await until(lambda: partition(follower, bad).log_end_offset == 1)
    await until(lambda: fetcher.partitions[(bad, 0)].failures == 0)
