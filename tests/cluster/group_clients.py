"""One small synchronous face over three real group consumers (kafka-python, confluent-kafka,
aiokafka): poll, assignment, commit, close. Also runnable as a script — a consumer that polls
until killed (`python -m tests.cluster.group_clients CLIENT BOOTSTRAP GROUP TOPIC`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import threading

SESSION_MS, HEARTBEAT_MS = 3_000, 300
Record = tuple[int, int, bytes]  # partition, offset, value


class KafkaPythonConsumer:
    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
            auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
            retry_backoff_ms=50, metadata_max_age_ms=2000)

    def poll(self, timeout_s: float) -> list[Record]:
        batches = self.consumer.poll(timeout_ms=int(timeout_s * 1000))
        return [(r.partition, r.offset, r.value) for recs in batches.values() for r in recs]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def positions(self) -> dict[int, int]:
        return {tp.partition: self.consumer.position(tp) for tp in self.consumer.assignment()}

    def commit(self) -> None:
        self.consumer.commit()

    def close(self) -> None:
        self.consumer.close()


class ConfluentConsumer:
    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
            "topic.metadata.refresh.interval.ms": 2000, "retry.backoff.ms": 50})
        self.consumer.subscribe([topic])

    def poll(self, timeout_s: float) -> list[Record]:
        messages = self.consumer.consume(num_messages=500, timeout=timeout_s)
        return [(m.partition(), m.offset(), m.value()) for m in messages if m.error() is None]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def positions(self) -> dict[int, int]:
        return {tp.partition: tp.offset for tp in self.consumer.position(self.consumer.assignment())}

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


class AioKafkaConsumer:
    """aiokafka on its own event loop in a thread, driven synchronously."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str) -> None:
        from aiokafka import AIOKafkaConsumer

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def make() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                topic, bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                auto_offset_reset="earliest", enable_auto_commit=False,
                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                retry_backoff_ms=50, metadata_max_age_ms=2000)
            await consumer.start()
            return consumer

        self.consumer = self._run(make())

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def poll(self, timeout_s: float) -> list[Record]:
        batches = self._run(self.consumer.getmany(timeout_ms=int(timeout_s * 1000)))
        return [(r.partition, r.offset, r.value) for recs in batches.values() for r in recs]

    def assignment(self) -> set[int]:
        async def get() -> set[int]:
            return {tp.partition for tp in self.consumer.assignment()}

        return self._run(get())

    def positions(self) -> dict[int, int]:
        async def get() -> dict[int, int]:
            return {tp.partition: await self.consumer.position(tp)
                    for tp in self.consumer.assignment()}

        return self._run(get())

    def commit(self) -> None:
        self._run(self.consumer.commit())

    def close(self) -> None:
        # aiokafka 0.14's stop() can surface the cancellation of its own background tasks after a
        # broker went away; its LeaveGroup has been answered by then.
        with contextlib.suppress(concurrent.futures.CancelledError):
            self._run(self.consumer.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


CONSUMERS = {"kafka-python": KafkaPythonConsumer, "confluent-kafka": ConfluentConsumer,
             "aiokafka": AioKafkaConsumer}


if __name__ == "__main__":
    client, bootstrap, group, topic = sys.argv[1:5]
    consumer = CONSUMERS[client](bootstrap, group, topic, "victim")
    while True:
        consumer.poll(0.2)
