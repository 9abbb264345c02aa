"""One producing loop per client library, for the failover and idempotence tests: each sends
`count` records one at a time with acks=all, calls `on_sent(i)` before record i (where a test
stops a broker or injects a fault), and returns the values the client saw acknowledged."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

OnSent = Callable[[int], None]


def produce_kafka_python(bootstrap: str, topic: str, on_sent: OnSent, count: int,
                         idempotent: bool) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                             enable_idempotence=idempotent, retries=50, retry_backoff_ms=100,
                             request_timeout_ms=5000, linger_ms=0,
                             max_in_flight_requests_per_connection=5)
    acked = []
    for i in range(count):
        on_sent(i)
        value = b"kp-%d" % i
        producer.send(topic, value=value).get(timeout=60)
        acked.append(value)
    producer.close()
    return acked


def produce_confluent(bootstrap: str, topic: str, on_sent: OnSent, count: int,
                      idempotent: bool) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent,
                         "acks": "all", "linger.ms": 0, "retry.backoff.ms": 100,
                         "message.timeout.ms": 60000})
    acked: list[bytes] = []
    errors: list = []
    for i in range(count):
        on_sent(i)
        producer.produce(topic, value=b"ck-%d" % i,
                         on_delivery=lambda err, msg: (errors if err else acked).append(msg.value()))
        assert producer.flush(60) == 0
    assert errors == []
    return acked


def produce_aiokafka(bootstrap: str, topic: str, on_sent: OnSent, count: int,
                     idempotent: bool) -> list[bytes]:
    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    enable_idempotence=idempotent, retry_backoff_ms=100,
                                    request_timeout_ms=5000)
        await producer.start()
        acked = []
        try:
            for i in range(count):
                await asyncio.get_running_loop().run_in_executor(None, on_sent, i)
                value = b"ak-%d" % i
                await producer.send_and_wait(topic, value)
                acked.append(value)
        finally:
            await producer.stop()
        return acked

    return asyncio.run(run())


PRODUCERS = {"kafka-python": produce_kafka_python, "confluent-kafka": produce_confluent,
             "aiokafka": produce_aiokafka}


def create_replicated_topic(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 3,
                                 "configs": {"min.insync.replicas": "2"}}})
    admin.close()
