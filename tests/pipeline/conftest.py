"""Pipeline fixtures: one local[2] SparkSession for the whole run, and data directories written by
real clients through a real broker (and, for edge cases, by storage.Log directly)."""

from __future__ import annotations

import random
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the pipeline extra is not installed")

from protocol.records import GZIP, LZ4, NO_COMPRESSION, SNAPPY, ZSTD, encode_batch  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402
from storage.log_manager import LogManager  # noqa: E402

CODECS = {"none": NO_COMPRESSION, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
SEGMENT_BYTES = 20_000
EVENTS = 400


@dataclass(slots=True)
class Expected:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int
    codec: str
    idempotent: bool = False


@dataclass
class Workload:
    data_dir: Path
    records: dict[tuple[str, int, int], Expected] = field(default_factory=dict)

    def count(self, topic: str | None = None, partition: int | None = None) -> int:
        return sum(1 for t, p, _ in self.records
                   if topic in (None, t) and partition in (None, p))  # fmt: skip


@pytest.fixture(scope="session")
def spark():
    from pipeline.session import spark_session

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    session = spark_session(
        "local[2]", "kafka-sim-tests", progress=False,
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
              "spark.default.parallelism": "2"},
    )  # fmt: skip
    yield session
    session.stop()


def _value(rng: random.Random, i: int) -> bytes:
    # Half random bytes so that compression cannot shrink a segment into one batch.
    return rng.randbytes(rng.randint(20, 200)) + f"-{i}".encode() * rng.randint(1, 20)


@pytest.fixture(scope="session")
def produced(tmp_path_factory) -> Workload:
    """Three partitions of `orders` from kafka-python in each codec, and `events` from an
    idempotent confluent-kafka producer (gzip: librdkafka enables lz4 only once the broker has
    FindCoordinator); several segments per partition; broker stopped."""
    import confluent_kafka
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    from tests.harness import BrokerThread

    data_dir = tmp_path_factory.mktemp("produced") / "broker"
    rng = random.Random(6)
    broker = BrokerThread(data_dir, {"log.segment.bytes": str(SEGMENT_BYTES)}).start()
    workload = Workload(broker.data_dir)  # broker 0's log.dirs inside the cluster folder
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("orders", 3, 1), NewTopic("events", 1, 1)])
        admin.close()
        base_ts = int(time.time() * 1000) - 60_000
        for n, codec in enumerate(CODECS):
            producer = KafkaProducer(
                bootstrap_servers=broker.bootstrap, linger_ms=20, enable_idempotence=False,
                compression_type=None if codec == "none" else codec,
            )  # fmt: skip
            sent = []
            for i in range(150):
                key = None if i % 10 == 9 else f"key-{i % 13}".encode()
                headers = [("codec", codec.encode()), ("i", str(i).encode())]
                ts = base_ts + n * 1000 + i
                value = _value(rng, i)
                future = producer.send("orders", key=key, value=value, headers=headers,
                                       partition=i % 3, timestamp_ms=ts)  # fmt: skip
                sent.append((future, Expected(key, value, headers, ts, codec)))
            producer.flush()
            for future, expected in sent:
                meta = future.get(10)
                workload.records[("orders", meta.partition, meta.offset)] = expected
            producer.close()
        delivered: list[tuple[int, Expected]] = []
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
            "compression.type": "gzip", "linger.ms": 5, "batch.size": SEGMENT_BYTES // 2,
        })  # fmt: skip
        for i in range(EVENTS):
            # Repetitive values: librdkafka sends a batch uncompressed when gzip would not shrink it.
            value = rng.randbytes(rng.randint(64, 160)) * 2
            key, ts = f"user-{i % 40}".encode(), base_ts + 10_000 + i
            expected = Expected(key, value, [("n", str(i).encode())], ts, "gzip", idempotent=True)

            def on_delivery(err, msg, expected=expected):
                assert err is None, err
                delivered.append((msg.offset(), expected))

            producer.produce("events", key=key, value=value, partition=0, timestamp=ts,
                             headers=expected.headers, on_delivery=on_delivery)  # fmt: skip
            producer.poll(0)
        assert producer.flush(30) == 0
        for offset, expected in delivered:
            workload.records[("events", 0, offset)] = expected
    finally:
        broker.stop()
    return workload


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory) -> Workload:
    """Edge cases clients rarely write, through storage.Log: null key and value, a null header
    value, LogAppendTime, a transactional batch; node.id 7."""
    data_dir = tmp_path_factory.mktemp("synthetic") / "broker"
    workload = Workload(data_dir)
    clock = [int(time.time() * 1000)]
    manager = LogManager(data_dir, LogConfig(segment_bytes=SEGMENT_BYTES), now_ms=lambda: clock[0])
    manager.load()
    log = manager.create_log("edge", 0)
    append_time = manager.create_log("stamped", 0, LogConfig(message_timestamp_type="LogAppendTime"))
    rows = [(None, None, [("h", None)], clock[0] - 5), (b"k", b"", [], clock[0] - 4)]
    batch = encode_batch(rows, compression=ZSTD, producer_id=42, producer_epoch=3,
                         base_sequence=0, is_transactional=True)  # fmt: skip
    info = log.append_as_leader(batch, leader_epoch=1)
    for (key, value, headers, ts), offset in zip(rows, range(info.first_offset, 2), strict=True):
        workload.records[("edge", 0, offset)] = Expected(key, value, headers, ts, "zstd")
    info = append_time.append_as_leader(encode_batch([(b"a", b"b", [], clock[0] - 9)]), 1)
    workload.records[("stamped", 0, 0)] = Expected(b"a", b"b", [], info.log_append_time, "none")
    for each in (log, append_time):
        each.high_watermark = each.log_end_offset
    manager.shutdown()
    (data_dir / "meta.properties").write_text("version=1\ncluster.id=test\nnode.id=7\n")
    return workload


def make_cluster(source: Path, target: Path, replicas: int = 2) -> list[Path]:
    """Copy one broker's directory into broker-0/, broker-1/, ... with node.id = its index."""
    brokers = []
    for i in range(replicas):
        dst = target / f"broker-{i}"
        shutil.copytree(source, dst)
        text = (dst / "meta.properties").read_text()
        lines = [f"node.id={i}" if line.startswith("node.id=") else line for line in text.splitlines()]
        (dst / "meta.properties").write_text("\n".join(lines) + "\n")
        brokers.append(dst)
    return brokers


@pytest.fixture
def cluster_of():
    return make_cluster

