"""Transactional producers of the three Python clients against the broker over TCP: commit and
abort seen by read_committed and read_uncommitted consumers (markers take offsets),
consume-transform-produce with send_offsets_to_transaction, fencing by a second producer with the
same transactional.id, and a hung transaction aborted at its timeout."""

from __future__ import annotations

import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import ProducerFenced
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
             "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def broker(broker_factory):
    return broker_factory(OVERRIDES)


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def read(bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 1,
         max_rounds: int = 40) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of what a consumer with `isolation` reads from the start."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    for _ in range(max_rounds):
        for msg in consumer.consume(100, timeout=0.25):
            if msg.error() is None:
                got.append((msg.partition(), msg.offset(), msg.value()))
        if len(got) >= expect:
            break
    consumer.close()
    return sorted(got)


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.close()
    return high


def test_confluent_commit_and_abort(broker):
    create(broker.bootstrap, "ck-tx")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-1"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("ck-tx", b"committed-%d" % i)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(2):
        producer.produce("ck-tx", b"aborted-%d" % i)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("ck-tx", b"last")
    producer.commit_transaction(30)
    # 3 records, a commit marker, 2 records, an abort marker, 1 record, a commit marker.
    assert read(broker.bootstrap, "ck-tx", "read_committed", 4) == [
        (0, 0, b"committed-0"), (0, 1, b"committed-1"), (0, 2, b"committed-2"), (0, 7, b"last")]
    assert [v for _, _, v in read(broker.bootstrap, "ck-tx", "read_uncommitted", 6)] == [
        b"committed-0", b"committed-1", b"committed-2", b"aborted-0", b"aborted-1", b"last"]
    assert end_offset(broker.bootstrap, "ck-tx") == 9


def test_confluent_send_offsets_moves_the_group_only_on_commit(broker):
    bootstrap = broker.bootstrap
    create(bootstrap, "ck-in")
    create(bootstrap, "ck-out")
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(4):
        plain.produce("ck-in", b"in-%d" % i)
    assert plain.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe(["ck-in"])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-ctp"})
    producer.init_transactions(30)
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 4 and time.monotonic() < deadline:
        seen += [m for m in consumer.consume(10, timeout=0.5) if m.error() is None]
    assert len(seen) == 4

    def committed() -> int:
        [tp] = consumer.committed([TopicPartition("ck-in", 0)], timeout=10)
        return tp.offset

    def transform(upto: int, commit: bool) -> None:
        producer.begin_transaction()
        for m in seen[:upto]:
            producer.produce("ck-out", m.value().upper())
        producer.send_offsets_to_transaction(
            [TopicPartition("ck-in", 0, upto)], consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)

    transform(2, commit=True)
    assert committed() == 2
    transform(4, commit=False)
    assert committed() == 2  # the aborted transaction's offsets never show
    transform(4, commit=True)
    assert committed() == 4
    consumer.close()
    assert [v for _, _, v in read(bootstrap, "ck-out", "read_committed", 6)] == [
        b"IN-0", b"IN-1", b"IN-0", b"IN-1", b"IN-2", b"IN-3"]


def test_confluent_second_producer_fences_the_first(broker):
    create(broker.bootstrap, "ck-fence")
    first = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-f"})
    first.init_transactions(30)
    first.begin_transaction()
    first.produce("ck-fence", b"zombie")
    first.flush(30)
    second = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-f"})
    second.init_transactions(30)  # aborts the first one's open transaction
    second.begin_transaction()
    second.produce("ck-fence", b"winner")
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as exc:
        first.commit_transaction(30)
    error = exc.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    assert [v for _, _, v in read(broker.bootstrap, "ck-fence", "read_committed", 1)] == [b"winner"]


def test_a_hung_transaction_is_aborted_at_its_timeout(broker_factory):
    broker = broker_factory({
        **OVERRIDES, "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    create(broker.bootstrap, "ck-hung")
    hung = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-hung",
                     "transaction.timeout.ms": "1000"})
    hung.init_transactions(30)
    hung.begin_transaction()
    hung.produce("ck-hung", b"never committed")
    hung.flush(30)  # ... and the producer goes silent
    other = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-other"})
    other.init_transactions(30)
    other.begin_transaction()
    other.produce("ck-hung", b"after")
    other.commit_transaction(30)
    # Held back by the open transaction until the coordinator aborts it (timeout 1 s).
    assert [v for _, _, v in read(broker.bootstrap, "ck-hung", "read_committed", 1,
                                  max_rounds=80)] == [b"after"]
    coordinator = broker.cluster.brokers[0].transaction_coordinator
    # The abort's markers are written before its CompleteAbort record (Kafka's order), so the
    # consumer can see "after" an instant before the coordinator has moved on: wait for it.
    deadline = time.monotonic() + 10
    while (txn := coordinator.describe("ck-hung")[1]).state.kafka_name == "PrepareAbort":
        assert time.monotonic() < deadline, "the abort never completed"
        time.sleep(0.005)
    assert txn.state.kafka_name == "CompleteAbort" and txn.producer_epoch == 1


def test_kafka_python_commit_and_abort(broker):
    create(broker.bootstrap, "kp-tx")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-1")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("kp-tx", b"kept")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("kp-tx", b"dropped")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert [v for _, _, v in read(broker.bootstrap, "kp-tx", "read_committed", 1)] == [b"kept"]
    assert [v for _, _, v in read(broker.bootstrap, "kp-tx", "read_uncommitted", 2)] == [
        b"kept", b"dropped"]
    consumer = KafkaConsumer("kp-tx", bootstrap_servers=broker.bootstrap,
                             isolation_level="read_committed", auto_offset_reset="earliest",
                             consumer_timeout_ms=1000)
    assert [m.value for m in consumer] == [b"kept"]  # kafka-python's own read_committed
    consumer.close()


async def test_aiokafka_commit_abort_and_fencing(broker):
    bootstrap = broker.bootstrap
    create(bootstrap, "aio-tx")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-1")
    await producer.start()
    async with producer.transaction():
        await producer.send_and_wait("aio-tx", b"one")
    await producer.begin_transaction()
    await producer.send_and_wait("aio-tx", b"gone")
    await producer.abort_transaction()
    rival = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-1")
    await rival.start()
    async with rival.transaction():
        await rival.send_and_wait("aio-tx", b"two")
    await rival.stop()
    with pytest.raises(ProducerFenced):
        await producer.begin_transaction()
        await producer.send_and_wait("aio-tx", b"zombie")
        await producer.commit_transaction()
    await producer.stop()
    consumer = AIOKafkaConsumer("aio-tx", bootstrap_servers=bootstrap,
                                isolation_level="read_committed", auto_offset_reset="earliest")
    await consumer.start()
    got = []
    try:
        while len(got) < 2:
            batch = await consumer.getmany(timeout_ms=1000)
            assert batch, got
            got += [m.value for ms in batch.values() for m in ms]
    finally:
        await consumer.stop()
    assert got == [b"one", b"two"]


def test_ctl_transactions_shows_the_open_transaction(broker_factory, capsys):
    from broker.control import ctl
    from broker.control.control_client import ControlClient, ControlError

    broker = broker_factory(OVERRIDES, control=True)
    create(broker.bootstrap, "ctl-tx", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ctl-1",
                         "transaction.timeout.ms": "30000"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("ctl-tx", b"x", partition=1)
    producer.flush(30)
    client = ControlClient(broker.control.url)
    [view] = client.transactions("ctl-1")
    assert (view["state"], view["producer_epoch"], view["timeout_ms"], view["coordinator"]) == (
        "Ongoing", 0, 30000, 0)
    assert view["partitions"] == [{"topic": "ctl-tx", "partition": 1}]
    assert ctl.main(["--url", broker.control.url, "transactions"]) == 0
    out = capsys.readouterr().out
    assert "ctl-1" in out and "Ongoing" in out and "ctl-tx:1" in out
    with pytest.raises(ControlError):
        client.transactions("nobody")
    producer.commit_transaction(30)


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    consumer.close()
    return tp.offset


def test_kafka_python_send_offsets_and_fencing(broker):
    from kafka.errors import KafkaError as KPError
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KPPartition

    create(broker.bootstrap, "kp-in")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-2")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("kp-in", b"a")
    producer.send_offsets_to_transaction({KPPartition("kp-in", 0): OffsetAndMetadata(3, "", -1)},
                                         "kp-group")
    producer.commit_transaction()
    assert committed_offset(broker.bootstrap, "kp-group", "kp-in") == 3
    producer.begin_transaction()
    producer.send_offsets_to_transaction({KPPartition("kp-in", 0): OffsetAndMetadata(9, "", -1)},
                                         "kp-group")
    producer.abort_transaction()
    assert committed_offset(broker.bootstrap, "kp-group", "kp-in") == 3

    rival = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-2")
    rival.init_transactions()
    with pytest.raises(KPError) as exc:  # ProducerFencedError, or the epoch error before KIP-588
        producer.begin_transaction()
        producer.send("kp-in", b"zombie").get(30)
        producer.commit_transaction()
    assert "Fenced" in type(exc.value).__name__ or "Epoch" in type(exc.value).__name__, exc.value
    rival.close()
    producer.close(timeout=5)


async def test_aiokafka_send_offsets_moves_the_group_on_commit(broker):
    create(broker.bootstrap, "aio-in")
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-2")
    await producer.start()
    try:
        from aiokafka.structs import TopicPartition as AioPartition

        async with producer.transaction():
            await producer.send_and_wait("aio-in", b"x")
            await producer.send_offsets_to_transaction({AioPartition("aio-in", 0): 5}, "aio-group")
        await producer.begin_transaction()
        await producer.send_offsets_to_transaction({AioPartition("aio-in", 0): 8}, "aio-group")
        await producer.abort_transaction()
    finally:
        await producer.stop()
    assert committed_offset(broker.bootstrap, "aio-group", "aio-in") == 5
