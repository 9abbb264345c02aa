"""Produce v8+ record-level errors (KIP-467): a batch refused because of some of its records
answers INVALID_RECORD (or INVALID_TIMESTAMP) with the records' indexes and messages, and clients
fail exactly those records with that message."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidRecordError, InvalidTimestampError, KafkaError

from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic
from tests.integration.test_protocol_edges import PRODUCE, produce_body

NO_KEY = "Compacted topic cannot accept message without key in topic partition {}"


async def test_the_answer_names_the_refused_records(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "compacted", configs={"cleanup.policy": "compact"})
    batch = encode_batch([(b"k", b"a", [], 1), (None, b"b", [], 1), (b"k", b"c", [], 1)])
    response = await client.request(PRODUCE, 8, produce_body({("compacted", 0): batch}))
    [answer] = response.responses[0].partition_responses
    message = NO_KEY.format("compacted-0")
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (1, message)]
    assert answer.error_message == (
        "One or more records have been rejected due to 1 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{message}')]")
    assert (answer.base_offset, answer.log_start_offset) == (-1, 0)
    # v7 has neither field: the same refusal, code only.
    response = await client.request(PRODUCE, 7, produce_body({("compacted", 0): batch}))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    await client.close()


def test_kafka_python_fails_exactly_the_keyless_record(broker_factory):
    broker = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-compacted", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=500, retries=0)
    futures = [producer.send("kp-compacted", key=key, value=b"v", partition=0)
               for key in (b"a", None, b"c")]
    producer.flush()
    errors = [f.exception for f in futures]
    producer.close()
    assert isinstance(errors[1], InvalidRecordError)
    assert NO_KEY.format("kp-compacted-0") in str(errors[1])
    for other in (errors[0], errors[2]):  # failed with the batch, not for themselves
        assert type(other) is KafkaError and "part of a batch" in str(other)


def test_confluent_kafka_gets_invalid_record_and_timestamp(broker_factory):
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([
        CkNewTopic("ck-compacted", 1, 1, config={"cleanup.policy": "compact"}),
        CkNewTopic("ck-recent", 1, 1, config={"message.timestamp.before.max.ms": "60000"})])
    for future in created.values():
        future.result(10)
    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "retries": 0})
    now = int(time.time() * 1000)
    producer.produce("ck-compacted", key=b"a", value=b"v", partition=0,
                     on_delivery=lambda err, msg: reports.append(("a", err)))
    producer.produce("ck-compacted", value=b"keyless", partition=0,
                     on_delivery=lambda err, msg: reports.append(("keyless", err)))
    producer.produce("ck-recent", value=b"old", partition=0, timestamp=now - 3_600_000,
                     on_delivery=lambda err, msg: reports.append(("old", err)))
    assert producer.flush(10) == 0
    codes = {name: err.code() if err else None for name, err in reports}
    # librdkafka fails the whole batch with the partition's error.
    assert codes == {"a": ErrorCode.INVALID_RECORD, "keyless": ErrorCode.INVALID_RECORD,
                     "old": ErrorCode.INVALID_TIMESTAMP}


@pytest.mark.parametrize("ts_offset_ms", [-3_600_000, 3_600_000])
def test_kafka_python_invalid_timestamp_both_ways(broker_factory, ts_offset_ms):
    broker = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-recent", 1, 1, topic_configs={
        "message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    now = int(time.time() * 1000)
    with pytest.raises(InvalidTimestampError, match="is out of range"):
        producer.send("kp-recent", value=b"v", timestamp_ms=now + ts_offset_ms).get(10)
    producer.send("kp-recent", value=b"v", timestamp_ms=now).get(10)
    producer.close()
