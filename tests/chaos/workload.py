"""The chaos workload: an idempotent acks=all producer writing numbered values and a consumer group
(confluent-kafka and kafka-python members) reading and committing, each in a thread, recording
exactly what happened to them."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

RATE_PER_S = 300  # below where one pipelining acks=all connection falls behind (README)


def value_of(n: int) -> bytes:
    return b"chaos-%09d" % n


@dataclass(slots=True)
class Ack:
    partition: int
    # None: librdkafka acknowledged it implicitly (a later batch of the partition succeeded
    # while this one's response was lost), so the client never learned where it went.
    offset: int | None


@dataclass
class ChaosProducer:
    """confluent-kafka with enable.idempotence, unlimited retries and no message timeout: every
    record is either acknowledged (with its offset) or still being retried."""

    bootstrap: str
    topic: str
    rate_per_s: int = RATE_PER_S
    compression: str = "none"
    client_log: Path | None = None  # librdkafka's idempotence (eos) debug log, for a post-mortem
    sent: int = 0
    acked: dict[bytes, Ack] = field(default_factory=dict)
    failed: list[tuple[bytes, str]] = field(default_factory=list)  # delivery errors
    fatal: list[str] = field(default_factory=list)  # the client's fatal errors
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        debug = {}
        if self.client_log is not None:
            logger = logging.getLogger(f"chaos-producer-{id(self)}")
            logger.addHandler(logging.FileHandler(self.client_log))
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            debug = {"debug": "eos", "logger": logger, "log_level": 7}
        self.producer = Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "message.timeout.ms": 0,  # never give up on a record: retried until acknowledged
            "linger.ms": 5, "retry.backoff.ms": 100, "compression.type": self.compression,
            # socket.timeout.ms stays at 60 s, above any injected hold-up (3 x 5 s): a request
            # the broker processes after the client gave up on it and re-sent its records under a
            # bumped epoch is written twice, by Kafka too (the chaos found it with 10 s).
            "error_cb": self._on_error, "log_level": 2, **debug,
        })  # fmt: skip

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _on_delivery(self, err: KafkaError | None, msg) -> None:
        if err is not None:
            self.failed.append((msg.value(), str(err)))
        else:
            self.acked[msg.value()] = Ack(msg.partition(), msg.offset())

    def start(self) -> ChaosProducer:
        self._thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set() and not self.fatal:
            due = int((time.monotonic() - started) * self.rate_per_s)
            while self.sent < due:
                value = value_of(self.sent)
                try:
                    self.producer.produce(self.topic, key=value[-4:], value=value,
                                          on_delivery=self._on_delivery)
                except BufferError:  # the client's queue is full while a broker is away
                    break
                self.sent += 1
            self.producer.poll(0.01)

    def stop_and_flush(self, timeout_s: float) -> int:
        """Stop producing; wait for every sent record's ack. Returns how many are still unacked."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.producer.flush(timeout_s)


@dataclass
class GroupMember:
    """One member of the consumer group: polls, commits synchronously after each batch (at least
    once), and remembers every value it read."""

    bootstrap: str
    topic: str
    group: str
    name: str
    client: str = "confluent-kafka"  # or "kafka-python": two clients' group code in one group
    seen: set[bytes] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    commits: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> GroupMember:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        if self.client == "kafka-python":
            self._run_kafka_python()
            return
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000, "log_level": 2,
        })  # fmt: skip
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                messages = consumer.consume(500, 0.5)
                for m in messages:
                    if m.error() is None:
                        self.seen.add(m.value())
                    elif m.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(m.error()))
                if any(m.error() is None for m in messages):
                    try:
                        consumer.commit(asynchronous=False)
                        self.commits += 1
                    except KafkaException as exc:  # a rebalance or a moving coordinator: next time
                        self.errors.append(str(exc))
        finally:
            consumer.close()  # commits nothing more: the last batch was committed above

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError as KafkaPythonError

        consumer = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                                 client_id=self.name, enable_auto_commit=False,
                                 auto_offset_reset="earliest", session_timeout_ms=10_000,
                                 heartbeat_interval_ms=1000, max_poll_records=500)  # fmt: skip
        try:
            while not self._stop.is_set():
                try:
                    batches = consumer.poll(timeout_ms=500)
                    for records in batches.values():
                        self.seen.update(r.value for r in records)
                    if batches:
                        consumer.commit()
                        self.commits += 1
                except KafkaPythonError as exc:  # a rebalance or a moving coordinator: next time
                    self.errors.append(repr(exc))
        finally:
            consumer.close(autocommit=False)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
