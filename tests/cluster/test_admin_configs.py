"""AlterConfigs, IncrementalAlterConfigs and DeleteRecords in an embedded 3-broker cluster on the
manual clock, over the raw protocol: config changes reach every replica's log at once and show in
DescribeConfigs; DeleteRecords moves the log start offset on every replica and waits for the ISR."""

from __future__ import annotations

import asyncio
import time

from broker.admin.config_describer import SOURCE_TOPIC
from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.cluster.test_replication import (
    LAG_MS,
    advance,
    caught_up,
    consumer_fetch,
    create,
    partition,
)
from tests.cluster.test_replication import cluster as cluster  # noqa: F401 (the fixture)
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import PRODUCE, produce_body

DELETE_RECORDS, DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 21, 32, 33, 44
TOPIC, BROKER = 2, 4


def resource(name: str, configs: dict[str, tuple[int, str | None]], kind: int = TOPIC) -> dict:
    return {"resource_type": kind, "resource_name": name, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, (op, v) in configs.items()]}


async def produce(port: int, name: str, value: bytes, timestamp: int, acks: int = -1) -> int:
    client = await RawClient.connect(port)
    response = await client.request(PRODUCE, 9, produce_body(
        {(name, 0): encode_batch([(None, value, [], timestamp)])}, acks=acks))
    await client.close()
    return response.responses[0].partition_responses[0].error_code


async def test_config_changes_reach_every_replica_and_describe_configs(cluster):  # noqa: F811
    leader, followers = await create(cluster, "cfg")
    replicas = [leader, *followers]
    client = await RawClient.connect(followers[0].port)

    async def incremental(resources: list[dict], validate_only: bool = False) -> list:
        response = await client.request(INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": resources, "validate_only": validate_only})
        return [(r.error_code, r.error_message) for r in response.responses]

    assert await incremental([resource("cfg", {"max.message.bytes": (0, "200")})],
                             validate_only=True) == [(0, None)]
    # One request names a resource once at most (Kafka refuses both mentions otherwise).
    assert await incremental([resource("cfg", {"retention.ms": (0, "soon")})]) == [
        (ErrorCode.INVALID_CONFIG, "Invalid config value for resource ConfigResource(type=TOPIC, "
                                   "name='cfg'): invalid value 'soon' for retention.ms: invalid literal for "
                                   "int() with base 10: 'soon'")]
    assert await incremental([resource("cfg", {"max.message.bytes": (0, "200"),
                                               "cleanup.policy": (2, "compact")}),
                              resource("nope", {"retention.ms": (0, "1")}),
                              resource("0", {"log.dirs": (0, "/elsewhere")}, BROKER)]) == [
        (0, None),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION"),
        (ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)"),
    ]
    await until(lambda: all(partition(b, "cfg").log.config.max_message_bytes == 200 for b in replicas))
    assert all(partition(b, "cfg").log.config.cleanup_policy == "delete,compact" for b in replicas)
    now = int(time.time() * 1000)
    assert await produce(leader.port, "cfg", b"x" * 300, now) == ErrorCode.MESSAGE_TOO_LARGE

    response = await client.request(DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": TOPIC, "resource_name": "cfg",
        "configuration_keys": ["max.message.bytes", "retention.ms"]}],
        "include_synonyms": False, "include_documentation": False})
    described = {c.name: (c.value, c.config_source) for c in response.results[0].configs}
    assert described == {"max.message.bytes": ("200", SOURCE_TOPIC),
                         "retention.ms": ("604800000", 5)}

    # AlterConfigs replaces the whole set: max.message.bytes and cleanup.policy return to defaults.
    response = await client.request(ALTER_CONFIGS, 0, {"resources": [{
        "resource_type": TOPIC, "resource_name": "cfg",
        "configs": [{"name": "retention.ms", "value": "60000"}]}], "validate_only": False})
    assert response.responses[0].error_code == ErrorCode.NONE
    await until(lambda: all(partition(b, "cfg").log.config.retention_ms == 60_000 for b in replicas))
    assert all(partition(b, "cfg").log.config.max_message_bytes == 1048588 for b in replicas)
    assert await produce(leader.port, "cfg", b"old", now - 120_000) == ErrorCode.NONE
    await caught_up(leader, followers, "cfg")
    for b in replicas:
        b.log_manager.get_log("cfg", 0).roll()
    assert await produce(leader.port, "cfg", b"x" * 300, now) == ErrorCode.NONE
    await caught_up(leader, followers, "cfg")
    # The old batch's segment is past retention.ms on every replica.
    await until(lambda: sum(b.log_manager.cleanup() for b in replicas) == 0
                and all(partition(b, "cfg").log_start_offset == 1 for b in replicas))
    await client.close()


async def test_delete_records_moves_the_low_watermark_on_every_replica(cluster):  # noqa: F811
    leader, followers = await create(cluster, "del", {"segment.bytes": "200"})
    replicas = [leader, *followers]
    now = int(time.time() * 1000)
    for i in range(6):
        assert await produce(leader.port, "del", b"v%d" % i, now) == ErrorCode.NONE
    await caught_up(leader, followers, "del")
    assert len(partition(leader, "del").log.segments) > 2
    client = await RawClient.connect(leader.port)

    async def send(offset: int, timeout_ms: int = 10_000) -> int:
        return await client.send(DELETE_RECORDS, 2, {"topics": [{"name": "del", "partitions": [
            {"partition_index": 0, "offset": offset}]}], "timeout_ms": timeout_ms})

    async def answer(correlation_id: int) -> tuple[int, int]:
        response = await asyncio.wait_for(client.receive(DELETE_RECORDS, 2, correlation_id), 10)
        result = response.topics[0].partitions[0]
        return result.error_code, result.low_watermark

    assert await answer(await send(100)) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    correlation_id = await send(3)
    purgatory = leader.replica_manager.delete_records_purgatory
    await until(lambda: purgatory.delayed == 1)  # parked: the followers have not followed yet
    assert partition(leader, "del").log_start_offset == 3
    assert [partition(f, "del").log_start_offset for f in followers] == [0, 0]
    await advance(cluster, leader, active=2, total_ms=1_500)
    assert await answer(correlation_id) == (ErrorCode.NONE, 3)
    for b in replicas:
        log = partition(b, "del").log
        assert log.log_start_offset == 3
        assert log.segments[0].base_offset > 0  # whole segments below it are gone
    seen = await consumer_fetch(followers[0].port, "del", 0)
    assert seen.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    seen = await consumer_fetch(leader.port, "del", 1)
    assert seen.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (await consumer_fetch(leader.port, "del", 3)).log_start_offset == 3

    # -1 is the high watermark; with the followers stalled the answer times out.
    for f in followers:
        f.replica_manager.pause_replication()
    correlation_id = await send(-1, timeout_ms=300)
    await until(lambda: purgatory.delayed == 1)
    await advance(cluster, leader, active=0, total_ms=400)
    assert await answer(correlation_id) == (ErrorCode.REQUEST_TIMED_OUT, -1)
    assert partition(leader, "del").log_start_offset == 6
    for f in followers:
        f.replica_manager.resume_replication()
    await advance(cluster, leader, active=2, total_ms=1_500)
    assert all(partition(b, "del").log_start_offset == 6 for b in replicas)
    await client.close()


async def test_a_follower_left_below_the_log_start_offset_starts_over_there(cluster):
    leader, (f1, f2) = await create(cluster, "gap")
    now = int(time.time() * 1000)
    assert await produce(leader.port, "gap", b"first", now) == ErrorCode.NONE
    await caught_up(leader, [f1, f2], "gap")
    f2.replica_manager.pause_replication()
    assert await produce(leader.port, "gap", b"v0", now, acks=1) == ErrorCode.NONE  # f2 lacks it
    await advance(cluster, leader, active=1, total_ms=LAG_MS + 500)  # f2 leaves the ISR
    assert f2.broker_id not in partition(leader, "gap").isr
    for i in range(1, 3):
        assert await produce(leader.port, "gap", b"v%d" % i, now) == ErrorCode.NONE
    client = await RawClient.connect(leader.port)
    correlation_id = await client.send(DELETE_RECORDS, 0, {"topics": [{"name": "gap", "partitions": [
        {"partition_index": 0, "offset": -1}]}], "timeout_ms": 10_000})
    await advance(cluster, leader, active=1, total_ms=1_500)
    response = await asyncio.wait_for(client.receive(DELETE_RECORDS, 0, correlation_id), 10)
    assert (response.topics[0].partitions[0].error_code,
            response.topics[0].partitions[0].low_watermark) == (ErrorCode.NONE, 4)
    await client.close()

    f2.replica_manager.resume_replication()  # it fetches from 1, below the leader's start 4
    await until(lambda: partition(f2, "gap").log_start_offset == 4
                and partition(f2, "gap").log_end_offset == 4)
    await advance(cluster, leader, active=2, total_ms=1_000)
    assert f2.broker_id in partition(leader, "gap").isr
