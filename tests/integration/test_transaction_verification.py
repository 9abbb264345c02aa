"""Transaction verification (KIP-890 part 1): a transactional Produce to a partition its producer
has no transaction open on is written only if the coordinator has that partition in the
producer's ongoing transaction. A client naming another producer's id and epoch cannot join that
transaction; the real producer's transaction goes on and commits."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import PRODUCE, produce_body

TOPIC = "verified"


async def steal(port: int, transactional_id: str, producer_id: int, epoch: int,
                partition: int) -> ErrorCode:
    """A transactional batch under another producer's id and epoch, as a hostile client sends it."""
    batch = encode_batch([(b"k", b"stolen", [], None)], producer_id=producer_id,
                         producer_epoch=epoch, base_sequence=0, is_transactional=True)
    client = await RawClient.connect(port)
    response = await client.request(PRODUCE, 9, {
        **produce_body({(TOPIC, partition): batch}, acks=-1), "transactional_id": transactional_id})
    await client.close()
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


async def test_another_producers_transaction_cannot_be_joined(async_broker):
    bootstrap = f"127.0.0.1:{async_broker.port}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(TOPIC, 2, 1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="victim")
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(TOPIC, b"mine", partition=0)
        log = async_broker.replica_manager.partitions[(TOPIC, 0)].log
        [producer_id] = log.producer_state.ongoing
        epoch = log.producer_state.producers[producer_id].producer_epoch
        other = async_broker.replica_manager.partitions[(TOPIC, 1)].log
        # Partition 1 is not in the victim's transaction: under the victim's transactional id
        # (its id and epoch match) the partition is refused; under another transactional id,
        # the id is not that one's producer.
        assert await steal(async_broker.port, "victim", producer_id, epoch, 1) == \
            ErrorCode.INVALID_TXN_STATE
        assert await steal(async_broker.port, "intruder", producer_id, epoch, 1) == \
            ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await steal(async_broker.port, "victim", producer_id, epoch + 1, 1) == \
            ErrorCode.INVALID_PRODUCER_EPOCH  # the coordinator's PRODUCER_FENCED, for a Produce
        assert other.log_end_offset == 0 and not other.producer_state.ongoing
        # The victim's own write to a partition it adds is verified and goes in.
        await producer.send_and_wait(TOPIC, b"mine too", partition=1)
        await producer.commit_transaction()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, isolation_level="read_committed",
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        seen: list[bytes] = []
        while len(seen) < 2:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=200), 10)
            seen += [m.value for ms in batches.values() for m in ms]
        assert sorted(seen) == [b"mine", b"mine too"]
    finally:
        await consumer.stop()


async def test_transactional_records_need_a_transactional_id(async_broker):
    """Kafka's first check of a Produce: transactional records without a transactional id are
    refused as TRANSACTIONAL_ID_AUTHORIZATION_FAILED, authorizer or not."""
    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{async_broker.port}")
    await admin.start()
    await admin.create_topics([NewTopic(TOPIC, 1, 1)])
    await admin.close()
    batch = encode_batch([(b"k", b"v", [], None)], producer_id=7, producer_epoch=0,
                         base_sequence=0, is_transactional=True)
    client = await RawClient.connect(async_broker.port)
    response = await client.request(PRODUCE, 9, produce_body({(TOPIC, 0): batch}, acks=-1))
    assert response.responses[0].partition_responses[0].error_code == \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert async_broker.replica_manager.partitions[(TOPIC, 0)].log.log_end_offset == 0
    await client.close()


async def test_a_write_verified_before_its_transaction_ended_is_refused(async_broker):
    """Kafka's verification guard: between the coordinator's answer and the append, a marker for
    the producer may land (the transaction aborted on its timeout). The write must not open a
    new transaction nobody would end: INVALID_TXN_STATE, nothing written."""
    from protocol.transaction_records import ControlType, marker_batch
    from storage.append_origin import AppendOrigin

    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{async_broker.port}")
    await admin.start()
    await admin.create_topics([NewTopic(TOPIC, 1, 1)])
    await admin.close()
    rm, key = async_broker.replica_manager, (TOPIC, 0)
    guard = rm.start_verification(key, 7)  # the coordinator is being asked
    ended = await rm.produce(-1, 5000, {key: marker_batch(7, 0, ControlType.ABORT, 0)},
                             origin=AppendOrigin.COORDINATOR)
    assert ended[key].error == ErrorCode.NONE
    write = encode_batch([(b"k", b"late", [], None)], producer_id=7, producer_epoch=0,
                         base_sequence=0, is_transactional=True)
    results = await rm.produce(-1, 5000, {key: write}, verified={key: (7, guard)})
    assert results[key].error == ErrorCode.INVALID_TXN_STATE
    log = rm.partitions[key].log
    assert log.log_end_offset == 1 and not log.producer_state.ongoing  # the marker only
    assert not rm.verification_guards
    # A guard that held: the write goes in, and the guard is spent
    guard = rm.start_verification(key, 8)
    write = encode_batch([(b"k", b"on time", [], None)], producer_id=8, producer_epoch=0,
                         base_sequence=0, is_transactional=True)
    results = await rm.produce(-1, 5000, {key: write}, verified={key: (8, guard)})
    assert results[key].error == ErrorCode.NONE and 8 in log.producer_state.ongoing
    assert not rm.verification_guards
