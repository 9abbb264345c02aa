"""The audit job: checks what the log promises, over the batch view of every replica's segments.

Checks, per topic-partition and replica: every batch's CRC-32C holds; offsets run contiguously from
the log start to the log end (retention only moves the log start; compacted topics may have gaps);
the log reaches the checkpointed high watermark; replicas are byte-identical batch by batch below
each replica's high watermark (above what the log cleaner rewrote: each replica compacts its own
log); no (producer id, epoch, sequence) appears twice; transactions are well formed: no producer
writes a non-transactional batch while its transaction is open, and no marker carries an older
producer epoch than the transaction it closes (both refused by the leader, so only damage or a
broker bug puts them in a log).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pipeline.layout import INTERNAL_TOPICS, compacted_topics, find_replicas
from pipeline.source import FORMAT

KINDS = ("crc", "offset-gap", "offset-overlap", "missing-below-high-watermark",
         "replica-divergence", "duplicate-sequence", "plain-write-in-transaction",
         "stale-transaction-marker")  # fmt: skip
_BATCH_COLUMNS = ("broker_id,topic,partition,segment,position,base_offset,last_offset,"
                  "record_count,crc_valid,digest,producer_id,producer_epoch,base_sequence,"
                  "is_transactional,is_control")  # fmt: skip
_V = ("topic", "partition", "replica", "offset", "kind", "detail")


@dataclass(slots=True, frozen=True, order=True)
class Violation:
    topic: str
    partition: int
    replica: int
    offset: int
    kind: str
    detail: str


@dataclass(slots=True)
class AuditResult:
    partitions: int
    replicas: int
    records: int
    violations: list[Violation]

    def summary(self) -> str:
        return (f"audit: {self.partitions} partitions, {self.records} records, "
                f"{len(self.violations)} violations")  # fmt: skip


def run_audit(spark: SparkSession, data_dir: str | Path) -> AuditResult:
    replicas = find_replicas(data_dir)
    meta = spark.createDataFrame(
        [(r.replica, r.topic, r.partition, r.log_start_offset, r.high_watermark, r.cleaned_to)
         for r in replicas],
        "broker_id int, topic string, partition int, log_start long, hw long, cleaned_to long",
    )  # fmt: skip
    batches = (
        spark.read.format(FORMAT).option("path", str(data_dir)).option("level", "batches")
        .option("columns", _BATCH_COLUMNS).load()
    ).cache()  # fmt: skip
    try:
        records = batches.agg(F.sum("record_count")).first()[0] or 0
        found = (
            _crc(batches)
            .unionByName(_contiguity(batches, meta, _compacted(data_dir, replicas)))
            .unionByName(_below_high_watermark(batches, meta))
            .unionByName(_divergence(batches, meta))
            .unionByName(_duplicates(batches))
            .unionByName(_transactions(batches))
        )
        violations = sorted(Violation(*row) for row in found.collect())
    finally:
        batches.unpersist()
    partitions = len({(r.topic, r.partition) for r in replicas})
    return AuditResult(partitions, len(replicas), int(records), violations)


def _compacted(data_dir: str | Path, replicas: list) -> set[str]:
    """Topics whose logs may have offset gaps: compacted by config (when the folder has the
    cluster's metadata store), the internal topics (Kafka always compacts them), and any topic with a
    cleaner checkpoint on some replica. A replica's gaps need not lie below its own checkpoint: a
    follower copies its leader's cleaned batches, and a broker killed between the cleaner's swap
    and its checkpoint write keeps the gaps with an older checkpoint (Kafka's too). A multi-process
    cluster keeps its configs in ZooKeeper, so only the last two tell there."""
    return (compacted_topics(data_dir) | set(INTERNAL_TOPICS)
            | {r.topic for r in replicas if r.cleaned_to is not None})  # fmt: skip


def _violations(df: DataFrame, kind: str, detail) -> DataFrame:
    return df.select(
        "topic", "partition", F.col("broker_id").alias("replica"), "offset",
        F.lit(kind).alias("kind"), detail.alias("detail"),
    )  # fmt: skip


def _crc(batches: DataFrame) -> DataFrame:
    bad = batches.where(~F.col("crc_valid")).withColumn("offset", F.col("base_offset"))
    detail = F.format_string("CRC-32C mismatch in batch at segment %d position %d",
                             F.col("segment"), F.col("position"))  # fmt: skip
    return _violations(bad, "crc", detail)


def _contiguity(batches: DataFrame, meta: DataFrame, compacted: set[str]) -> DataFrame:
    per_log = Window.partitionBy("broker_id", "topic", "partition").orderBy("base_offset")
    df = (
        batches.join(meta, ["broker_id", "topic", "partition"], "left")
        .withColumn("prev_end", F.lag(F.col("last_offset") + 1).over(per_log))
        # The first batch must start at the log start, or before it (the log start may sit
        # mid-segment after DeleteRecords); with no checkpoint, wherever it starts.
        .withColumn("expected", F.coalesce("prev_end", "log_start", "base_offset"))
    )  # fmt: skip
    gaps = df.where(F.col("base_offset") > F.col("expected"))
    if compacted:
        gaps = gaps.where(~F.col("topic").isin(*sorted(compacted)))
    overlaps = df.where(F.col("prev_end").isNotNull() & (F.col("base_offset") < F.col("prev_end")))
    gap_detail = F.format_string("offsets %d..%d missing", F.col("expected"), F.col("base_offset") - 1)
    overlap_detail = F.format_string(
        "batch starts at %d, previous batch ends at %d", F.col("base_offset"), F.col("prev_end") - 1
    )
    return _violations(gaps.withColumn("offset", F.col("expected")), "offset-gap", gap_detail).unionByName(
        _violations(overlaps.withColumn("offset", F.col("base_offset")), "offset-overlap", overlap_detail)
    )  # fmt: skip


def _below_high_watermark(batches: DataFrame, meta: DataFrame) -> DataFrame:
    """A log that ends below its checkpointed high watermark lost acknowledged records."""
    ends = batches.groupBy("broker_id", "topic", "partition").agg(
        (F.max("last_offset") + 1).alias("log_end")
    )
    df = meta.join(ends, ["broker_id", "topic", "partition"], "left").withColumn(
        "log_end", F.coalesce("log_end", F.coalesce("log_start", F.lit(0)))
    )
    short = df.where(F.col("hw").isNotNull() & (F.col("log_end") < F.col("hw")))
    detail = F.format_string("log ends at %d, high watermark is %d", F.col("log_end"), F.col("hw"))
    return _violations(short.withColumn("offset", F.col("log_end")), "missing-below-high-watermark", detail)


def _divergence(batches: DataFrame, meta: DataFrame) -> DataFrame:
    """Below each replica's high watermark every replica must hold the very same batches."""
    keys = ["topic", "partition"]
    # Each replica's log cleaner rewrites its own log, when it gets to it (Kafka's too): below the
    # highest cleaner checkpoint among a partition's replicas, copies may differ and still be right.
    cleaned = meta.groupBy(*keys).agg(F.coalesce(F.max("cleaned_to"), F.lit(0)).alias("clean_end"))
    committed = (
        batches.join(meta, ["broker_id", *keys]).join(cleaned, keys)
        .where(F.col("hw").isNotNull() & (F.col("last_offset") < F.col("hw"))
               & (F.col("base_offset") >= F.col("clean_end")))
        .select(*keys, "base_offset", "last_offset").distinct()
    )  # fmt: skip
    # Every replica whose own committed range covers the batch is expected to hold it.
    expected = committed.join(meta, keys).where(
        (F.col("base_offset") >= F.coalesce("log_start", F.lit(0)))
        & (F.col("last_offset") < F.col("hw"))
    ).select("broker_id", *keys, "base_offset")  # fmt: skip
    held = batches.select("broker_id", *keys, "base_offset", "digest", "crc_valid")
    seen = expected.join(held, ["broker_id", *keys, "base_offset"], "left")
    # Reference = the digest most replicas hold (ties: the lowest broker id among them); a copy
    # that fails its own CRC cannot be the reference, so the intact replica is never the one blamed.
    votes = seen.where(F.col("digest").isNotNull() & F.col("crc_valid")).groupBy(*keys, "base_offset", "digest").agg(
        F.count("*").alias("votes"), F.min("broker_id").alias("first")
    )
    best = Window.partitionBy(*keys, "base_offset").orderBy(F.desc("votes"), "first")
    reference = votes.withColumn("rank", F.row_number().over(best)).where("rank = 1").select(
        *keys, "base_offset", F.col("digest").alias("reference"), F.col("first").alias("ref_broker")
    )
    bad = seen.join(reference, [*keys, "base_offset"]).where(
        F.col("digest").isNull() | (F.col("digest") != F.col("reference"))
    )
    detail = F.when(
        F.col("digest").isNull(),
        F.format_string("batch at %d missing (broker %d has it)", F.col("base_offset"), F.col("ref_broker")),
    ).otherwise(
        F.format_string("batch at %d differs from broker %d's", F.col("base_offset"), F.col("ref_broker"))
    )  # fmt: skip
    return _violations(bad.withColumn("offset", F.col("base_offset")), "replica-divergence", detail)


def _duplicates(batches: DataFrame) -> DataFrame:
    """Idempotence: each (producer id, epoch, sequence) once per partition replica."""
    idempotent = batches.where(
        (F.col("producer_id") >= 0) & (F.col("base_sequence") >= 0) & ~F.col("is_control")
        & F.col("crc_valid") & (F.col("record_count") > 0)
    )  # fmt: skip
    records = idempotent.select(
        "broker_id", "topic", "partition", "producer_id", "producer_epoch", "base_offset",
        F.explode(F.sequence(F.lit(0), F.col("record_count") - 1)).alias("delta"),
        "base_sequence",
    ).withColumn(  # sequences wrap from 2^31-1 to 0, as Kafka's incrementSequence does
        "sequence", F.pmod(F.col("base_sequence") + F.col("delta"), F.lit(2**31))
    ).withColumn("offset", F.col("base_offset") + F.col("delta"))
    same = Window.partitionBy("broker_id", "topic", "partition", "producer_id", "producer_epoch",
                              "sequence").orderBy("offset")  # fmt: skip
    dups = (
        records.withColumn("first_offset", F.first("offset").over(same))
        .where(F.col("offset") != F.col("first_offset"))
        .groupBy("broker_id", "topic", "partition", "producer_id", "producer_epoch", "base_offset")
        .agg(F.min("sequence").alias("lo"), F.max("sequence").alias("hi"),
             F.min("first_offset").alias("first_offset"))
    )  # fmt: skip
    detail = F.format_string(
        "producer %d epoch %d sequences %d..%d already written at offset %d",
        F.col("producer_id"), F.col("producer_epoch"), F.col("lo"), F.col("hi"), F.col("first_offset"),
    )  # fmt: skip
    return _violations(dups.withColumn("offset", F.col("base_offset")), "duplicate-sequence", detail)


def _transactions(batches: DataFrame) -> DataFrame:
    """Per producer, in offset order: a transaction is its transactional batches up to the next
    control batch (its marker). A plain batch inside one, or a marker older than its data, is a
    violation."""
    producer = Window.partitionBy("broker_id", "topic", "partition", "producer_id").orderBy("base_offset")
    since_marker = producer.rowsBetween(Window.unboundedPreceding, -1)
    df = batches.where((F.col("producer_id") >= 0) & F.col("crc_valid")).withColumn(
        # the producer's previous transactional or control batch: is its transaction open?
        "prev_txn", F.last(F.when(F.col("is_control"), F.lit("marker"))
                           .when(F.col("is_transactional"), F.lit("data")), ignorenulls=True)
        .over(since_marker),
    ).withColumn(  # markers seen so far: a transaction is the data between two of them
        "txn_no", F.sum(F.col("is_control").cast("int")).over(since_marker),
    ).withColumn("txn_no", F.coalesce("txn_no", F.lit(0)))
    outside = df.where(~F.col("is_transactional") & ~F.col("is_control")
                       & (F.col("prev_txn") == "data"))
    outside_detail = F.format_string(
        "producer %d wrote a non-transactional batch while its transaction was open",
        F.col("producer_id"))
    # a marker closes the data before it: that data carries the previous txn_no
    data_epochs = df.where(F.col("is_transactional") & ~F.col("is_control")).groupBy(
        "broker_id", "topic", "partition", "producer_id", "txn_no").agg(
        F.max("producer_epoch").alias("data_epoch"))
    markers = df.where(F.col("is_control")).withColumn("closes", F.col("txn_no"))
    stale = markers.join(
        data_epochs.withColumnRenamed("txn_no", "closes"),
        ["broker_id", "topic", "partition", "producer_id", "closes"],
    ).where(F.col("producer_epoch") < F.col("data_epoch"))
    stale_detail = F.format_string(
        "producer %d's marker has epoch %d, its transaction's data epoch %d",
        F.col("producer_id"), F.col("producer_epoch"), F.col("data_epoch"))
    return _violations(outside.withColumn("offset", F.col("base_offset")),
                       "plain-write-in-transaction", outside_detail).unionByName(
        _violations(stale.withColumn("offset", F.col("base_offset")),
                    "stale-transaction-marker", stale_detail))


def write_audit_json(result: AuditResult, data_dir: str | Path, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "audit.json"
    doc = {
        "data_dir": str(Path(data_dir).resolve()),
        "partitions": result.partitions,
        "replicas": result.replicas,
        "records": result.records,
        "violation_count": len(result.violations),
        "violations": [asdict(v) for v in result.violations],
    }
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path
