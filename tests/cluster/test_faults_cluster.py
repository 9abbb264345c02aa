"""Injected faults on a real broker over TCP: each kind does what it says, counts run out, and
clearing stops them — the request path, not only the control API, is under test."""

from __future__ import annotations

import asyncio
import time

from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import METADATA, PRODUCE, create_topic, produce_body


def one_batch(value: bytes) -> dict:
    return produce_body({("faults", 0): encode_batch([(None, value, [], 1)])})


def error_of(response) -> int:
    return response.responses[0].partition_responses[0].error_code


async def test_error_fault_answers_the_code_until_its_count_runs_out(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "faults")
    faults = async_broker.context.faults
    fault = faults.add(async_broker.broker_id, "Produce", error=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       count=2)
    log = async_broker.replica_manager.partitions[("faults", 0)].log
    for _ in range(2):
        assert error_of(await client.request(PRODUCE, 9, one_batch(b"x"))) == \
            ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert log.log_end_offset == 0  # an injected error is answered instead of processing
    assert error_of(await client.request(PRODUCE, 9, one_batch(b"y"))) == ErrorCode.NONE
    assert log.log_end_offset == 1
    assert fault.hits == 2 and faults.list() == []
    await client.close()


async def test_drop_response_processes_then_closes(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "faults")
    async_broker.context.faults.add(async_broker.broker_id, "Produce", drop_response=True, count=1)
    await client.send(PRODUCE, 9, one_batch(b"kept"))
    assert await client.is_closed_by_peer()
    assert async_broker.replica_manager.partitions[("faults", 0)].log_end_offset == 1
    await client.close()


async def test_disconnect_closes_without_processing(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "faults")
    async_broker.context.faults.add(async_broker.broker_id, "Produce", disconnect=True)
    await client.send(PRODUCE, 9, one_batch(b"lost"))
    assert await client.is_closed_by_peer()
    assert async_broker.replica_manager.partitions[("faults", 0)].log_end_offset == 0
    assert async_broker.context.faults.clear() == 1
    again = await RawClient.connect(async_broker.port)
    assert error_of(await again.request(PRODUCE, 9, one_batch(b"ok"))) == ErrorCode.NONE
    await again.close()


async def test_delay_fault_holds_the_request(async_broker):
    client = await RawClient.connect(async_broker.port)
    async_broker.context.faults.add(async_broker.broker_id, "Metadata", delay_ms=150, count=1)
    started = time.perf_counter()
    response = await asyncio.wait_for(client.request(METADATA, 12, {"topics": None}), 10)
    assert time.perf_counter() - started >= 0.15
    assert response.controller_id == async_broker.broker_id
    await client.close()


async def test_partition_filter_only_hits_that_partition(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "faults", 2)
    async_broker.context.faults.add(async_broker.broker_id, "Produce", partition=("faults", 1),
                                    error=ErrorCode.KAFKA_STORAGE_ERROR, count=1)
    assert error_of(await client.request(PRODUCE, 9, one_batch(b"p0"))) == ErrorCode.NONE
    response = await client.request(PRODUCE, 9, produce_body(
        {("faults", 1): encode_batch([(None, b"p1", [], 1)])}))
    assert error_of(response) == ErrorCode.KAFKA_STORAGE_ERROR
    await client.close()
