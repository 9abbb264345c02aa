"""A topic's compression.type, as Kafka's LogValidator applies it: a batch whose codec is not the
topic's is rebuilt with the topic's codec (its producer fields kept), a compressed batch whose inner
offsets are out of order is rebuilt in order, and a rebuilt batch past max.message.bytes is
refused with MESSAGE_TOO_LARGE."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.compression import compress
from protocol.compression_type import GZIP, LZ4, NO_COMPRESSION, SNAPPY, ZSTD
from protocol.errors import ErrorCode
from protocol.records import (
    _I32,
    BATCH_LENGTH_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    decode_batch,
    encode_batch,
    iter_batches,
)
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic, partition_errors
from tests.integration.test_protocol_edges import _resealed, produce_body
from tests.unit.protocol.test_records_hostile import ATTRS, record

PRODUCE = 0


def stored(broker, topic: str, partition: int = 0) -> list:
    log = broker.replica_manager.partitions[(topic, partition)].log
    data = log.read(0, 1 << 20).records
    return [decode_batch(data, pos) for pos, _ in iter_batches(data)]


async def test_a_batch_is_stored_with_the_topics_codec(async_broker):
    client = await RawClient.connect(async_broker.port)
    for codec in ("gzip", "lz4", "zstd", "snappy", "uncompressed"):
        await create_topic(client, f"c-{codec}", 1, {"compression.type": codec})
    await create_topic(client, "c-gzip-level", 1, {"compression.type": "gzip",
                                                  "compression.gzip.level": "1"})
    sent = encode_batch([(b"k%d" % i, b"value" * 20, [("h", b"x")], 1_000 + i) for i in range(5)],
                        compression=SNAPPY, producer_id=7, producer_epoch=2, base_sequence=0)
    plain = encode_batch([(b"k", b"v" * 100, [], 1_000)])
    response = await client.request(PRODUCE, 9, produce_body(
        {(f"c-{codec}", 0): sent for codec in ("gzip", "lz4", "zstd", "snappy", "uncompressed")}
        | {("c-gzip-level", 0): plain}))
    assert set(partition_errors(response).values()) == {ErrorCode.NONE}
    _, sent_records = decode_batch(sent)
    for codec, expected in (("gzip", GZIP), ("lz4", LZ4), ("zstd", ZSTD), ("snappy", SNAPPY),
                            ("uncompressed", NO_COMPRESSION)):
        [(header, records)] = stored(async_broker, f"c-{codec}")
        assert header.compression == expected
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 0)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
            (r.offset, r.timestamp, r.key, r.value, r.headers) for r in sent_records]
    [(header, [only])] = stored(async_broker, "c-gzip-level")
    assert header.compression == GZIP and only.value == b"v" * 100
    # The producer's idempotence state follows the rebuilt batch: a retry is a duplicate.
    response = await client.request(PRODUCE, 9, produce_body({("c-gzip", 0): sent}))
    [answer] = response.responses[0].partition_responses
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    assert len(stored(async_broker, "c-gzip")) == 1
    await client.close()


async def test_inner_offsets_out_of_order_are_rebuilt_in_order(async_broker):
    """Some old clients numbered a compressed batch's records wrongly; Kafka rewrites them."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "disordered")
    sent = bytearray(encode_batch([(None, b"a", [], 1_000)] * 3, compression=GZIP))
    # The same three records, each at offset delta 0, compressed again in place of the original

    blob = compress(GZIP, record(ATTRS, 0, 0, -1, 1, b"a", 0) * 3)

    def zero_deltas(b: bytearray) -> None:
        b[HEADER_SIZE:] = blob
        _I32.pack_into(b, BATCH_LENGTH_OFFSET, len(b) - LOG_OVERHEAD)

    response = await client.request(PRODUCE, 9, produce_body(
        {("disordered", 0): _resealed(bytes(sent), zero_deltas)}))
    assert partition_errors(response) == {("disordered", 0): ErrorCode.NONE}
    [(header, records)] = stored(async_broker, "disordered")
    assert header.compression == GZIP and [r.offset for r in records] == [0, 1, 2]
    await client.close()


async def test_a_rebuilt_batch_past_max_message_bytes_is_refused(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "grows", 1, {"compression.type": "uncompressed",
                                            "max.message.bytes": "500"})
    sent = encode_batch([(None, b"z" * 5_000, [], 1_000)], compression=GZIP)
    assert len(sent) < 500
    response = await client.request(PRODUCE, 9, produce_body({("grows", 0): sent}))
    assert partition_errors(response) == {("grows", 0): ErrorCode.MESSAGE_TOO_LARGE}
    assert async_broker.replica_manager.partitions[("grows", 0)].log_end_offset == 0
    await client.close()


def test_a_real_client_reads_what_the_topics_codec_stored(kafka_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    [future] = admin.create_topics([NewTopic("zstd-topic", 1, 1,
                                             config={"compression.type": "zstd"})]).values()
    future.result(30)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "compression.type": "none",
                         "enable.idempotence": True, "linger.ms": 5})
    for i in range(100):
        producer.produce("zstd-topic", key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "z",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("zstd-topic", 0, 0)])
    seen = []
    while len(seen) < 100:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        seen.append((message.offset(), message.key(), message.value()))
    consumer.close()
    assert seen == [(i, b"k%d" % i, b"v%d" % i) for i in range(100)]
    server = kafka_broker.cluster.brokers[0]
    codecs = kafka_broker.call(lambda: {
        header.compression for _, header in iter_batches(
            server.replica_manager.partitions[("zstd-topic", 0)].log.read(0, 1 << 20).records)})
    assert codecs == {ZSTD}
