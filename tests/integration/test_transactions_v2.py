"""Transactions v2 (KIP-890 part 2, transaction.version 2) as a Kafka 4 Java producer speaks them,
in raw requests (no client here speaks them): no AddPartitionsToTxn or AddOffsetsToTxn, the
partitions added by Produce v12 and TxnOffsetCommit v5, and every EndTxn v5 bumping the epoch."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from broker.metadata.topic_names import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode
from protocol.records import decode_batch, encode_batch, iter_batches
from protocol.transaction_records import TransactionState
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import PRODUCE, create_topic, produce_body

FIND_COORDINATOR, INIT_PRODUCER_ID, END_TXN, TXN_OFFSET_COMMIT = 10, 22, 26, 28
OFFSET_FETCH, API_VERSIONS = 9, 18
TOPIC, GROUP, TID = "v2", "v2-group", "v2-txn"


async def init_producer(client: RawClient, transactional_id: str = TID) -> tuple[int, int]:
    body = {"transactional_id": transactional_id, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1}
    answers = []

    async def initialised() -> bool:
        # As a client: the coordinator first (which makes __transaction_state), then the id once
        # the coordinator's partition is loaded.
        found = await client.request(FIND_COORDINATOR, 3, {"key": transactional_id, "key_type": 1})
        if found.error_code != ErrorCode.NONE:
            return False
        answers.append(await client.request(INIT_PRODUCER_ID, 5, body))
        return answers[-1].error_code == ErrorCode.NONE

    await until(initialised)
    return answers[-1].producer_id, answers[-1].producer_epoch


async def produce(client: RawClient, producer: tuple[int, int], partition: int, value: bytes,
                  sequence: int, version: int = 12) -> ErrorCode:
    batch = encode_batch([(b"k", value, [], None)], producer_id=producer[0],
                         producer_epoch=producer[1], base_sequence=sequence, is_transactional=True)
    response = await client.request(PRODUCE, version, {
        **produce_body({(TOPIC, partition): batch}, acks=-1), "transactional_id": TID})
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


async def end_txn(client: RawClient, producer: tuple[int, int], commit: bool,
                  version: int = 5) -> tuple[ErrorCode, int, int]:
    response = await client.request(END_TXN, version, {
        "transactional_id": TID, "producer_id": producer[0], "producer_epoch": producer[1],
        "committed": commit})
    return ErrorCode(response.error_code), response.get("producer_id", -1), \
        response.get("producer_epoch", -1)


async def commit_offset(client: RawClient, producer: tuple[int, int], offset: int) -> ErrorCode:
    async def found() -> bool:  # as a client: the group's coordinator first
        answer = await client.request(FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
        return answer.error_code == ErrorCode.NONE

    await until(found)
    response = await client.request(TXN_OFFSET_COMMIT, 5, {
        "transactional_id": TID, "group_id": GROUP, "producer_id": producer[0],
        "producer_epoch": producer[1], "generation_id": -1, "member_id": "",
        "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    return ErrorCode(response.topics[0].partitions[0].error_code)


async def read_committed(port: int, end_offsets: dict[int, int]) -> list[bytes]:
    """Every record a read_committed consumer gets up to the given positions."""
    consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}",
                                isolation_level="read_committed", enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(TOPIC, p) for p in end_offsets]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        seen: list[bytes] = []
        async def behind() -> bool:
            return any([await consumer.position(tp) < end_offsets[tp.partition]
                        for tp in partitions])

        while await behind():
            batches = await consumer.getmany(timeout_ms=100)
            seen += [m.value for ms in batches.values() for m in ms]
        return seen
    finally:
        await consumer.stop()


async def test_a_v2_producer_adds_nothing_itself_and_each_end_bumps_its_epoch(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, TOPIC, partitions=2)
    pid, epoch = await init_producer(client)
    coordinator = async_broker.transaction_coordinator
    txn = coordinator.manager.transactions[TID]

    # First transaction: two partitions and the group's offsets, nothing added beforehand.
    assert await produce(client, (pid, epoch), 0, b"one", 0) == ErrorCode.NONE
    assert await produce(client, (pid, epoch), 1, b"two", 0) == ErrorCode.NONE
    assert await commit_offset(client, (pid, epoch), 1) == ErrorCode.NONE
    assert txn.state == TransactionState.ONGOING and txn.client_transaction_version == 2
    assert {(TOPIC, 0), (TOPIC, 1), coordinator.offsets_partition_for(GROUP)} == txn.partitions
    assert await end_txn(client, (pid, epoch), commit=True) == (ErrorCode.NONE, pid, epoch + 1)
    await until(lambda: txn.state == TransactionState.COMPLETE_COMMIT)
    # The markers carry the bumped epoch: the producer's late writes of that transaction are
    # stale now, on the partitions it wrote to and on the others.
    assert await produce(client, (pid, epoch), 0, b"late", 1) == ErrorCode.INVALID_PRODUCER_EPOCH
    # A retried EndTxn (the epoch it had) gets the same answer; the other outcome does not.
    assert await end_txn(client, (pid, epoch), commit=True) == (ErrorCode.NONE, pid, epoch + 1)
    assert (await end_txn(client, (pid, epoch), commit=False))[0] == ErrorCode.INVALID_TXN_STATE

    # Second transaction at the bumped epoch, its sequences from 0 again; aborted.
    epoch += 1
    assert await produce(client, (pid, epoch), 0, b"three", 0) == ErrorCode.NONE
    assert await commit_offset(client, (pid, epoch), 5) == ErrorCode.NONE
    assert await end_txn(client, (pid, epoch), commit=False) == (ErrorCode.NONE, pid, epoch + 1)
    await until(lambda: txn.state == TransactionState.COMPLETE_ABORT)
    # An EndTxn two epochs back is no retry: fenced.
    assert (await end_txn(client, (pid, epoch - 1), commit=False))[0] == \
        ErrorCode.PRODUCER_FENCED

    response = await client.request(OFFSET_FETCH, 7, {"group_id": GROUP, "require_stable": True,
                                                      "topics": [{"name": TOPIC,
                                                                  "partition_indexes": [0]}]})
    assert response.topics[0].partitions[0].committed_offset == 1  # the aborted 5 is gone
    await client.close()
    logs = {p: async_broker.replica_manager.partitions[(TOPIC, p)].log for p in (0, 1)}
    assert await read_committed(async_broker.port, {p: log.log_end_offset
                                                    for p, log in logs.items()}) \
        in ([b"one", b"two"], [b"two", b"one"])


async def test_a_transaction_still_ending_takes_no_write_of_the_next(async_broker):
    """The EndTxn is answered before its markers are written: the next transaction's first
    write (at the bumped epoch) to a partition still holding the last one open must not join it.
    The coordinator answers CONCURRENT_TRANSACTIONS, which a Produce says as the retriable
    NOT_ENOUGH_REPLICAS, until the markers are in."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, TOPIC)
    pid, epoch = await init_producer(client)
    txn = async_broker.transaction_coordinator.manager.transactions[TID]
    assert await produce(client, (pid, epoch), 0, b"first", 0) == ErrorCode.NONE
    channel = async_broker.transaction_coordinator.channel
    held = channel.send

    async def markers_held(marker, still_ours):  # the markers wait until released
        await released.wait()
        return await held(marker, still_ours)

    released = asyncio.Event()
    channel.send = markers_held
    try:
        assert await end_txn(client, (pid, epoch), commit=True) == \
            (ErrorCode.NONE, pid, epoch + 1)
        assert txn.state == TransactionState.PREPARE_COMMIT
        assert await produce(client, (pid, epoch + 1), 0, b"second", 0) == \
            ErrorCode.NOT_ENOUGH_REPLICAS
    finally:
        released.set()
    await until(lambda: txn.state == TransactionState.COMPLETE_COMMIT)
    assert await produce(client, (pid, epoch + 1), 0, b"second", 0) == ErrorCode.NONE
    assert await end_txn(client, (pid, epoch + 1), commit=False) == \
        (ErrorCode.NONE, pid, epoch + 2)
    await until(lambda: txn.state == TransactionState.COMPLETE_ABORT)
    await client.close()
    log = async_broker.replica_manager.partitions[(TOPIC, 0)].log
    assert await read_committed(async_broker.port, {0: log.log_end_offset}) == [b"first"]


async def test_a_producer_out_of_epochs_goes_on_under_a_new_id(async_broker):
    """The EndTxn whose bump would leave no epoch ends the transaction under the old id (its
    markers at the last epoch) and answers a new producer id at epoch 0; its retry gets the same
    answer."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, TOPIC)
    pid, _ = await init_producer(client)
    txn = async_broker.transaction_coordinator.manager.transactions[TID]
    txn.producer_epoch = last = 32766  # (32,766 transactions later)
    assert await produce(client, (pid, last), 0, b"old id", 0) == ErrorCode.NONE
    error, new_pid, new_epoch = await end_txn(client, (pid, last), commit=True)
    assert (error, new_epoch) == (ErrorCode.NONE, 0) and new_pid != pid
    await until(lambda: txn.state == TransactionState.COMPLETE_COMMIT)
    assert (txn.producer_id, txn.producer_epoch) == (new_pid, 0)
    log = async_broker.replica_manager.partitions[(TOPIC, 0)].log
    assert log.producer_state.producers[pid].producer_epoch == 32767  # the marker's
    assert await end_txn(client, (pid, last), commit=True) == (ErrorCode.NONE, new_pid, 0)
    assert await produce(client, (new_pid, 0), 0, b"new id", 0) == ErrorCode.NONE
    assert await end_txn(client, (new_pid, 0), commit=True) == (ErrorCode.NONE, new_pid, 1)
    await until(lambda: txn.state == TransactionState.COMPLETE_COMMIT)
    await client.close()
    assert await read_committed(async_broker.port, {0: log.log_end_offset}) == \
        [b"old id", b"new id"]


async def test_a_v1_producer_still_adds_its_partitions(async_broker):
    """Produce v11 (a transactions v1 client, as every client here) still needs the partition
    added first, and its EndTxn keeps the epoch."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, TOPIC)
    pid, epoch = await init_producer(client)
    assert await produce(client, (pid, epoch), 0, b"v1", 0, version=11) == \
        ErrorCode.INVALID_TXN_STATE
    await client.close()


def transaction_log_value_versions(broker) -> set[int]:
    versions = set()
    for (topic, _), partition in broker.replica_manager.partitions.items():
        if topic != TRANSACTION_STATE_TOPIC:
            continue
        for data in partition.log.chunks(1 << 20):
            for pos, header in iter_batches(data):
                versions |= {int.from_bytes(r.value[:2], "big") for r in decode_batch(data, pos)[1]
                             if not header.is_control and r.value is not None}
    return versions


async def test_transaction_version_2_is_finalized_and_writes_flexible_values(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(API_VERSIONS, 3, {"client_software_name": "t",
                                                      "client_software_version": "1"})
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    assert finalized["transaction.version"] == 2
    ranges = {k.api_key: k.max_version for k in response.api_keys}
    assert (ranges[0], ranges[26], ranges[28]) == (12, 5, 5)
    await init_producer(client)
    await client.close()
    assert transaction_log_value_versions(async_broker) == {1}


@pytest.mark.broker_config({"feature.levels": "transaction.version=0"})
async def test_transaction_version_0_answers_as_kafka_3_9(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(API_VERSIONS, 3, {"client_software_name": "t",
                                                      "client_software_version": "1"})
    assert "transaction.version" not in {f.name for f in response.finalized_features}
    ranges = {k.api_key: k.max_version for k in response.api_keys}
    assert (ranges[0], ranges[26], ranges[28]) == (11, 4, 4)
    await init_producer(client)
    await client.close()
    assert transaction_log_value_versions(async_broker) == {0}
