"""Regenerate tests/fuzz/corpus/: the request frames real clients send, recorded by a TCP proxy.

    .venv/bin/python tests/fuzz/record_corpus.py

A one-broker cluster advertises the proxy's address, so kafka-python, confluent-kafka and aiokafka
send everything through it: admin calls, produce, consume with a group, commit, leave. Each
client's frames (size prefix included, as on the wire) go to corpus/<client>.bin, at most
PER_VERSION distinct frames per (API, version). The fuzz tests only read these files.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.server.log_setup import configure_logging  # noqa: E402
from protocol import decode_request_header, encode_frame  # noqa: E402
from protocol.framing import FrameDecoder  # noqa: E402
from tests.harness import BrokerThread  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "corpus"
PER_VERSION = 4


class RecordingProxy:
    """Forwards every connection to the broker; keeps what the clients sent, by client."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.target_port = 0
        self.label = "unset"
        self.sent: dict[str, list[bytearray]] = defaultdict(list)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self, target_port: int) -> None:
        self.target_port = target_port
        self.thread.start()
        asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, sock=self.sock), self.loop).result()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        record = bytearray()
        self.sent[self.label].append(record)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                       keep: bytearray | None) -> None:
            try:
                while data := await src.read(65536):
                    if keep is not None:
                        keep += data
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer, record), pump(up_reader, writer, None))

    def frames(self) -> dict[str, list[bytes]]:
        out: dict[str, list[bytes]] = {}
        for label, streams in self.sent.items():
            kept: dict[tuple[int, int], list[bytes]] = defaultdict(list)
            for stream in streams:
                for frame in FrameDecoder(2**31).feed(bytes(stream)):
                    header, _ = decode_request_header(frame)
                    same = kept[header.api_key, header.api_version]
                    if frame not in same and len(same) < PER_VERSION:
                        same.append(frame)
            out[label] = [f for _, frames in sorted(kept.items()) for f in frames]
        return out


def kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("kp-topic", 2, 1, topic_configs={"retention.ms": "600000"})])
    admin.create_partitions({"kp-topic": NewPartitions(3)})
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
    for i in range(20):
        producer.send("kp-topic", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("kp-topic", bootstrap_servers=bootstrap, group_id="kp-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=20_000)
    for got, _ in enumerate(consumer, 1):
        if got == 20:
            break
    consumer.commit()
    consumer.close()
    admin.list_groups()
    admin.describe_groups(["kp-group"])
    admin.list_group_offsets("kp-group")
    admin.delete_groups(["kp-group"])
    admin.delete_topics(["kp-topic"])
    admin.close()


def confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("ck-topic", 2, 1)]).values():
        future.result()
    for future in admin.describe_configs([ConfigResource("TOPIC", "ck-topic")]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "compression.type": "zstd", "linger.ms": 5})
    for i in range(20):
        producer.produce("ck-topic", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["ck-topic"])
    got = 0
    while got < 20:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        got += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    for future in admin.delete_topics(["ck-topic"]).values():
        future.result()


async def aiokafka_clients(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic("ak-topic", 2, 1)])
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                compression_type="lz4")
    await producer.start()
    for i in range(20):
        await producer.send_and_wait("ak-topic", b"v%d" % i, key=b"k%d" % i)
    await producer.stop()
    consumer = AIOKafkaConsumer("ak-topic", bootstrap_servers=bootstrap, group_id="ak-group",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    got = 0
    while got < 20:
        batch = await consumer.getmany(timeout_ms=5000)
        got += sum(len(v) for v in batch.values())
    await consumer.commit()
    await consumer.stop()
    await admin.delete_topics(["ak-topic"])
    await admin.close()


def main() -> None:
    configure_logging("warning", json=False)
    proxy = RecordingProxy()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerThread(Path(tmp), {
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}).start()
        try:
            proxy.start(broker.port)
            bootstrap = f"127.0.0.1:{proxy.port}"
            proxy.label = "kafka-python"
            kafka_python(bootstrap)
            proxy.label = "confluent-kafka"
            confluent(bootstrap)
            proxy.label = "aiokafka"
            asyncio.run(aiokafka_clients(bootstrap))
        finally:
            broker.stop()
    CORPUS.mkdir(exist_ok=True)
    for label, frames in proxy.frames().items():
        (CORPUS / f"{label}.bin").write_bytes(b"".join(encode_frame(f) for f in frames))
        print(f"{label}: {len(frames)} frames")


if __name__ == "__main__":
    main()
