"""`kafka-sim pipeline audit|stats` on what a real 3-broker cluster leaves behind after a mixed
workload from real clients over TCP: idle partitions, a consumer group's compacted
`__consumer_offsets` (50 partitions, nearly all empty), an idempotent producer, a deleted topic."""

from __future__ import annotations

import base64
import html
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pytest

from broker.metadata.topic_names import OFFSETS_TOPIC
from pipeline import cli
from pipeline.audit import run_audit
from pipeline.layout import compacted_topics, find_replicas
from pipeline.report import PLOTS
from protocol.records import RECORDS_OFFSET, iter_batches
from tests.docs import ROOT

if TYPE_CHECKING:
    from tests.harness import BrokerThread

pytestmark = pytest.mark.slow

BROKERS = 3
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions' default, as under `make run`
ORDERS_PARTITIONS, ORDERS_WRITTEN = 6, 3  # orders-3..5 stay empty
TOPIC_PARTITIONS = {"orders": ORDERS_PARTITIONS, "payments": 3, "scratch": 2}
ORDERS, PAYMENTS, SCRATCH = 240, 150, 40  # records per topic
COMMITS = 4


@dataclass
class MixedWorkload:
    root: Path  # the cluster's data directory, as `make run` leaves ./data
    produced: dict[str, int] = field(default_factory=dict)  # topic -> records acknowledged
    commits: int = 0
    cleaned: int = 0  # offsets logs (replicas) the log cleaner compacted


def _produce_orders(bootstrap: str) -> int:
    """kafka-python without idempotence, only to partitions 0..2 of orders."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
                             linger_ms=5, compression_type="gzip")  # fmt: skip
    futures = [producer.send("orders", key=b"order-%d" % (i % 17), value=b"pizza %d " % i * (1 + i % 9),
                             partition=i % ORDERS_WRITTEN) for i in range(ORDERS)]  # fmt: skip
    producer.flush()
    offsets = [f.get(30).offset for f in futures]
    producer.close()
    return len(offsets)


def _produce_idempotent(bootstrap: str, topic: str, count: int) -> int:
    """confluent-kafka with enable.idempotence (acks=all, producer id and sequences)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "compression.type": "lz4"})  # fmt: skip
    delivered, errors = [], []
    for i in range(count):
        producer.produce(topic, key=b"account-%d" % (i % 11), value=b"%d cents" % (i * 37),
                         on_delivery=lambda err, msg: (errors if err else delivered).append(msg))  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0 and errors == []
    return len(delivered)


def _consume_and_commit(bootstrap: str, want: int, between: Callable[[], None]) -> int:
    """A kafka-python consumer group reads orders and payments, committing as it goes; then
    `between()`, one more commit and LeaveGroup. Returns the number of commits."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer("orders", "payments", bootstrap_servers=bootstrap, group_id="billing",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             max_poll_records=(want // COMMITS) + 1)  # fmt: skip
    seen = commits = 0
    while seen < want:  # poll returns as soon as records are there: no fixed waits
        seen += sum(len(records) for records in consumer.poll(timeout_ms=10_000).values())
        consumer.commit()  # each commit: OffsetCommit records in __consumer_offsets (acks=-1)
        commits += 1
    assert seen == want
    between()
    consumer.commit()  # the same offsets again: records above what was compacted
    consumer.close()  # LeaveGroup: the group is empty, its offsets stay
    return commits + 1


def _compact_offsets(cluster: BrokerThread) -> int:
    """What each broker's log cleaner does to `__consumer_offsets` on a long-running cluster (its
    100 MiB segments would take a test forever to fill): roll the written offsets logs, then a
    forced cleaner pass per broker. Each replica cleans only below its own high watermark, so the
    copies end up compacted differently, as in Kafka. Returns how many logs were cleaned."""

    def run() -> int:
        cleaned = 0
        for broker in cluster.cluster.brokers.values():
            for (topic, _), log in broker.log_manager.all_logs().items():
                if topic == OFFSETS_TOPIC:
                    log.roll()  # a no-op on an empty log
            cleaned += broker.log_manager.clean_logs(force=True)
        return cleaned

    return cluster.call(run)


def _delete_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.delete_topics([topic], timeout_ms=30_000)  # answered once every broker dropped it
    admin.close()


def serve_mixed_workload(root: Path) -> MixedWorkload:
    """Run a 3-broker cluster with its data in `root`, drive the workload through it, stop it."""
    from kafka.admin import KafkaAdminClient, NewTopic

    from tests.harness import BrokerThread

    cluster = BrokerThread(root, {"log.segment.bytes": "8192", "group.initial.rebalance.delay.ms": "0"},
                           brokers=BROKERS).start()  # fmt: skip
    workload = MixedWorkload(root)
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.create_topics([NewTopic(t, n, BROKERS) for t, n in TOPIC_PARTITIONS.items()])
        admin.close()
        workload.produced["orders"] = _produce_orders(cluster.bootstrap)
        workload.produced["payments"] = _produce_idempotent(cluster.bootstrap, "payments", PAYMENTS)
        assert _produce_idempotent(cluster.bootstrap, "scratch", SCRATCH) == SCRATCH
        # The commits were acknowledged with acks=-1: the leader's high watermark covers them,
        # so at least its copy gets compacted (followers' depend on their last fetch).
        def compact() -> None:
            workload.cleaned = _compact_offsets(cluster)

        workload.commits = _consume_and_commit(cluster.bootstrap, ORDERS + PAYMENTS, compact)
        _delete_topic(cluster.bootstrap, "scratch")
    finally:
        cluster.stop()  # flushes and checkpoints: Spark reads a stopped cluster's files
    return workload


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> MixedWorkload:
    workload = serve_mixed_workload(tmp_path_factory.mktemp("mixed") / "data")
    assert not list(workload.root.glob("broker-*/scratch-*"))  # the deleted topic's data is gone
    return workload


def _headers(folder: Path) -> list:
    """Batch headers of one replica's log, segment after segment."""
    return [h for log in sorted(folder.glob("*.log")) for _, h in iter_batches(log.read_bytes())]


def _records_on_disk(root: Path, pattern: str = "*") -> int:
    """Records in the replicas' segment files, from the batch headers (the oracle for R)."""
    return sum(h.record_count for folder in root.glob(f"broker-*/{pattern}-*")
               for h in _headers(folder))  # fmt: skip


def _has_gap(headers: list) -> bool:
    end = 0  # no DeleteRecords here: every log starts at 0
    for h in headers:
        if h.base_offset > end:
            return True
        end = h.next_offset
    return False


def test_the_workload_left_what_a_long_run_leaves(mixed):
    """Idle partitions, compacted offsets with gaps, no trace of the deleted topic."""
    assert _records_on_disk(mixed.root, "orders") == BROKERS * ORDERS  # every replica, every record
    assert _records_on_disk(mixed.root, "payments") == BROKERS * PAYMENTS
    assert all(not _headers(f) for f in mixed.root.glob(f"broker-*/orders-{ORDERS_PARTITIONS - 1}"))
    assert mixed.cleaned >= 1
    offsets = {f: _headers(f) for f in mixed.root.glob(f"broker-*/{OFFSETS_TOPIC}-*")}
    assert len(offsets) == BROKERS * OFFSETS_PARTITIONS
    assert sum(1 for h in offsets.values() if h) == BROKERS  # one group: one partition written
    assert any(_has_gap(h) for h in offsets.values())  # the cleaner dropped whole batches
    # Topic configs come from the cluster's metadata store, also for one broker's folder.
    assert compacted_topics(mixed.root) == compacted_topics(mixed.root / "broker-0") == {OFFSETS_TOPIC}


def test_audit_of_a_real_cluster_finds_nothing(spark, mixed, tmp_path, capsys):
    partitions = sum(n for t, n in TOPIC_PARTITIONS.items() if t != "scratch") + OFFSETS_PARTITIONS
    records = _records_on_disk(mixed.root)
    code = cli.main(["audit", "--data-dir", str(mixed.root), "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "audit.json").read_text())
    assert report["violations"] == [] and code == 0, out
    assert f"audit: {partitions} partitions, {records} records, 0 violations" in out
    assert report["replicas"] == BROKERS * partitions


def test_audit_compares_compacted_replicas_above_the_cleaned_range(spark, mixed, tmp_path):
    """Below the cleaner checkpoints the copies differ by design; above, a damaged copy is found."""
    root = tmp_path / "data"
    shutil.copytree(mixed.root, root)
    replicas = [r for r in find_replicas(root) if r.topic == OFFSETS_TOPIC and r.segments]
    clean_end = max(r.cleaned_to or 0 for r in replicas)
    victim = next(r for r in replicas if r.cleaned_to)  # a compacted copy
    # The first batch above every cleaned range that two replicas committed (the audit compares it).
    segment, pos, header = next(
        (Path(s.path), pos, h) for s in victim.segments
        for pos, h in iter_batches(Path(s.path).read_bytes())
        if h.base_offset >= clean_end and sum(h.last_offset < (r.high_watermark or 0) for r in replicas) >= 2
    )  # fmt: skip
    data = bytearray(segment.read_bytes())
    data[pos + RECORDS_OFFSET + 3] ^= 0xFF
    segment.write_bytes(bytes(data))
    result = run_audit(spark, root)
    found = {(v.topic, v.partition, v.replica, v.offset, v.kind) for v in result.violations}
    assert found == {(OFFSETS_TOPIC, victim.partition, victim.replica, header.base_offset, kind)
                     for kind in ("crc", "replica-divergence")}  # fmt: skip


@pytest.fixture(scope="module")
def stats_out(spark, mixed, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mixed-stats")
    code = cli.main(["stats", "--data-dir", str(mixed.root), "--out", str(out), "--no-progress"])
    assert code == 0
    return out


def test_stats_of_a_real_cluster_counts_every_partition(mixed, stats_out):
    folder = stats_out / "stats"
    table = pd.read_parquet(folder / "partitions.parquet")
    by_topic = table.groupby("topic")["records"].agg(["count", "sum"])
    assert by_topic.loc["orders"].tolist() == [ORDERS_PARTITIONS, ORDERS]
    assert by_topic.loc["payments"].tolist() == [3, PAYMENTS]
    assert by_topic.loc["__consumer_offsets", "count"] == OFFSETS_PARTITIONS
    assert by_topic.loc["__consumer_offsets", "sum"] >= mixed.commits
    assert "scratch" not in set(table["topic"])
    empty = table[table["records"] == 0]
    assert {("orders", p) for p in range(ORDERS_WRITTEN, ORDERS_PARTITIONS)} <= set(
        zip(empty["topic"], empty["partition"], strict=True))  # fmt: skip
    producers = pd.read_parquet(folder / "producers.parquet")
    assert [list(t) for t in producers["topics"]] == [["payments"]]  # scratch's producer went with it
    assert producers.loc[0, "records"] == PAYMENTS


def _decoded_png(data: bytes):
    """The image, fully decoded (Pillow comes with matplotlib); raises on a broken PNG."""
    from PIL import Image

    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    image = Image.open(io.BytesIO(data))
    image.load()  # decompresses every row: a truncated or corrupt stream fails here
    return image


def test_report_opens_with_every_plot(stats_out):
    html = (stats_out / "report.html").read_text(encoding="utf-8")
    images = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert [alt for alt, _ in images] == list(PLOTS.values())  # each plot once, in order
    for alt, encoded in images:
        data = base64.b64decode(encoded, validate=True)
        image = _decoded_png(data)
        assert len(data) > 10_000 and image.width >= 600 and image.height >= 200, alt
        colors = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colors is None or len(colors) > 8, alt  # axes, labels and data, not a blank image
    assert "http://" not in html and "https://" not in html  # self-contained: opens offline
    # The idle partitions show as empty cells and zeros, not as NaN, NaT or <NA>.
    assert not re.search(r"<td>(nan|NaN|NaT|&lt;NA&gt;)</td>", html)
    assert "__consumer_offsets" in html and "orders" in html and "payments" in html


# Reports, once the page has loaded, how the browser decoded each image (naturalWidth 0: broken).
_PROBE = """<script>window.addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "plot-probe";
  out.textContent = JSON.stringify([...document.images].map(
    i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight})));
  document.body.appendChild(out);
});</script>"""


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    """Debian's chromium, headless, offline, with a throwaway profile."""
    return subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip


def test_report_renders_every_plot_in_a_browser(stats_out, tmp_path):
    """Opened in a real browser, the report shows every plot: each image decodes to its size."""
    if shutil.which("chromium") is None:  # `make test` installs it; never a silent skip
        pytest.fail("this test needs Debian's chromium: apt-get install chromium", pytrace=False)
    page = tmp_path / "probe.html"  # a copy with the probe: the report itself stays script-free
    page.write_text((stats_out / "report.html").read_text(encoding="utf-8")
                    .replace("</body>", _PROBE + "</body>"), encoding="utf-8")  # fmt: skip
    dom = _chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile").stdout
    probe = re.search(r'<pre id="plot-probe">(.*?)</pre>', dom, re.S)
    assert probe, dom[-2000:]
    images = json.loads(html.unescape(probe.group(1)))
    assert [i["alt"] for i in images] == list(PLOTS.values())
    assert all(i["complete"] and i["width"] >= 600 and i["height"] >= 200 for i in images), images
    shot = tmp_path / "report.png"
    _chromium(f"--screenshot={shot}", "--window-size=1200,3000", (stats_out / "report.html").as_uri(),
              profile=tmp_path / "profile")  # fmt: skip
    assert _decoded_png(shot.read_bytes()).size == (1200, 3000)


def _readme_block(heading: str, language: str) -> str:
    text = (ROOT / "docs" / "pipeline.md").read_text().split(heading, 1)[1]
    return text.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_readme_pipeline_commands_run_as_written(mixed, tmp_path):
    """The pipeline document's block, line by line, in a folder whose `data` is a real cluster's
    (what `make run` leaves); its Spark snippet too."""
    work = tmp_path / "clone"
    work.mkdir()
    (work / "data").symlink_to(mixed.root)
    bin_dir = Path(sys.executable).parent
    block = _readme_block("# Spark pipeline: audit and statistics over the logs", "sh")
    lines = [shlex.split(line, comments=True) for line in block.splitlines()]
    commands = [words for words in lines if words]
    assert [c[:2] for c in commands] == [["make", "pipeline"], ["make", "run"],
                                         [".venv/bin/kafka-sim", "pipeline"],
                                         [".venv/bin/kafka-sim", "pipeline"]]
    repo = Path(__file__).resolve().parents[2]
    for words in commands[:2]:  # the make targets exist (the test itself made the cluster's data)
        assert subprocess.run(["make", "-n", *words[1:]], cwd=repo, capture_output=True,
                              check=False).returncode == 0, words
    outputs = []
    for words in commands[2:]:
        result = subprocess.run([str(bin_dir / "kafka-sim"), *words[1:]],
                                cwd=work, capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        outputs.append(result.stdout)
    assert re.search(r"^audit: \d+ partitions, \d+ records, 0 violations$", outputs[0], re.M)
    assert (work / "report" / "report.html").stat().st_size > 10_000
    snippet = _readme_block("**Reading the logs from your own Spark code**", "python")
    result = subprocess.run([sys.executable, "-c", snippet], cwd=work, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"^\|\s*(\d+)\|\s*(\d+)\|$", result.stdout, re.M)
    assert sorted(int(p) for p, _ in rows) == list(range(ORDERS_WRITTEN))
    assert sum(int(n) for _, n in rows) == mixed.produced["orders"] * BROKERS  # every replica's
