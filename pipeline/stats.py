"""The statistics job: per topic and partition counts, bytes, rates over time, message sizes, keys,
producers; one replica per partition, control records (transaction markers) counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.layout import find_replicas, one_copy
from pipeline.source import FORMAT

_COLUMNS = ("topic,partition,broker_id,offset,timestamp,key,key_size,value_size,producer_id,"
            "producer_epoch,sequence,is_control,compression")  # fmt: skip
# Time buckets for the rate series: the smallest giving at most ~120 points over the data's span.
_BUCKETS_S = (1, 5, 10, 30, 60, 300, 600, 1800, 3600, 21600, 86400, 604800)
_MAX_POINTS = 120
# Per-partition columns that count something (0 for an empty partition) and offsets (none then).
_COUNTS = ("records", "bytes", "control_records", "keys", "null_keys", "producers")
_OFFSETS = ("first_offset", "last_offset")


@dataclass(slots=True)
class Stats:
    topics: pd.DataFrame
    partitions: pd.DataFrame
    rates: pd.DataFrame  # topic, window_start, records, bytes
    sizes: pd.DataFrame  # topic, size_bucket (lower bound, powers of two), records
    producers: pd.DataFrame
    bucket_seconds: int

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"topics": self.topics, "partitions": self.partitions, "rates": self.rates,
                "sizes": self.sizes, "producers": self.producers}  # fmt: skip


def _payload(df: DataFrame) -> DataFrame:
    """Bytes a consumer receives for a record: key plus value (null counts as empty)."""
    return df.withColumn(
        "bytes", F.greatest("key_size", F.lit(0)) + F.greatest("value_size", F.lit(0))
    )


def run_stats(spark: SparkSession, data_dir: str | Path) -> Stats:
    copies = one_copy(find_replicas(data_dir))
    log_bytes = pd.DataFrame(
        [(r.topic, r.partition, r.replica, sum(s.size for s in r.segments), len(r.segments))
         for r in copies],
        columns=["topic", "partition", "replica", "log_bytes", "segments"],
    )  # fmt: skip
    raw = (
        spark.read.format(FORMAT).option("path", str(data_dir)).option("copies", "one")
        .option("columns", _COLUMNS).load()
    )  # fmt: skip
    df = _payload(raw.where(~F.col("is_control"))).cache()
    try:
        partitions = _partitions(df, raw)
        topics = _topics(df)
        bucket = _bucket_seconds(df)
        rates = (
            df.where(F.col("timestamp").isNotNull())
            .withColumn("window_start", F.timestamp_seconds(
                F.floor(F.unix_timestamp("timestamp") / bucket) * bucket))
            .groupBy("topic", "window_start")
            .agg(F.count("*").alias("records"), F.sum("bytes").alias("bytes"))
            .orderBy("topic", "window_start").toPandas()
        )  # fmt: skip
        sizes = (
            df.withColumn("size_bucket", F.when(F.col("value_size") <= 0, F.lit(0)).otherwise(
                F.pow(F.lit(2), F.floor(F.log2("value_size"))).cast("long")))
            .groupBy("topic", "size_bucket").agg(F.count("*").alias("records"))
            .orderBy("topic", "size_bucket").toPandas()
        )  # fmt: skip
        producers = (
            df.where(F.col("producer_id") >= 0)
            .groupBy("producer_id")
            .agg(F.sort_array(F.collect_set("producer_epoch")).alias("epochs"),
                 F.sort_array(F.collect_set("topic")).alias("topics"),
                 F.countDistinct("topic", "partition").alias("partitions"),
                 F.count("*").alias("records"), F.sum("bytes").alias("bytes"),
                 F.min("sequence").alias("min_sequence"), F.max("sequence").alias("max_sequence"),
                 F.min("timestamp").alias("first_timestamp"),
                 F.max("timestamp").alias("last_timestamp"))
            .orderBy("producer_id").toPandas()
        )  # fmt: skip
    finally:
        df.unpersist()
    # Right join: every partition on disk, also those without a record (idle partitions of a
    # topic, most of __consumer_offsets), which Spark's aggregation cannot see.
    partitions = _fill_empty(partitions.merge(log_bytes, on=["topic", "partition"], how="right"))
    return Stats(topics, partitions.sort_values(["topic", "partition"], ignore_index=True),
                 rates, sizes, producers, bucket)  # fmt: skip


def _fill_empty(partitions: pd.DataFrame) -> pd.DataFrame:
    """What an empty partition has: zero counts, no codecs, no offsets (not NaN everywhere).

    The join leaves NaN in every column Spark filled: a float where `codecs` holds a list, and
    count columns turned to float. Offsets become nullable integers: an empty log has none.
    """
    out = partitions.copy()
    out[list(_COUNTS)] = out[list(_COUNTS)].fillna(0).astype("int64")
    out["codecs"] = out["codecs"].map(lambda v: list(v) if pd.api.types.is_list_like(v) else [])
    out[list(_OFFSETS)] = out[list(_OFFSETS)].astype("Int64")
    return out


def _partitions(df: DataFrame, raw: DataFrame) -> pd.DataFrame:
    control = raw.where(F.col("is_control")).groupBy("topic", "partition").agg(
        F.count("*").alias("control_records")
    )
    span_s = (F.unix_millis(F.max("timestamp")) - F.unix_millis(F.min("timestamp"))) / 1000.0
    stats = df.groupBy("topic", "partition").agg(
        F.count("*").alias("records"),
        F.sum("bytes").alias("bytes"),
        F.min("offset").alias("first_offset"),
        F.max("offset").alias("last_offset"),
        F.min("timestamp").alias("first_timestamp"),
        F.max("timestamp").alias("last_timestamp"),
        F.countDistinct("key").alias("keys"),
        F.sum(F.col("key").isNull().cast("long")).alias("null_keys"),
        F.countDistinct("producer_id").alias("producers"),
        F.sort_array(F.collect_set("compression")).alias("codecs"),
        span_s.alias("span_seconds"),
    )
    stats = stats.withColumn(
        "records_per_second",
        F.when(F.col("span_seconds") > 0, F.col("records") / F.col("span_seconds")),
    )
    return stats.join(control, ["topic", "partition"], "full").toPandas()


def _topics(df: DataFrame) -> pd.DataFrame:
    return (
        df.groupBy("topic")
        .agg(F.countDistinct("partition").alias("partitions"),
             F.count("*").alias("records"), F.sum("bytes").alias("bytes"),
             F.countDistinct("key").alias("keys"),
             F.countDistinct("producer_id").alias("producers"),
             F.min("value_size").alias("min_value_size"),
             F.percentile("value_size", 0.5).alias("p50_value_size"),
             F.percentile("value_size", 0.9).alias("p90_value_size"),
             F.percentile("value_size", 0.99).alias("p99_value_size"),
             F.max("value_size").alias("max_value_size"),
             F.min("timestamp").alias("first_timestamp"),
             F.max("timestamp").alias("last_timestamp"))
        .orderBy("topic").toPandas()
    )  # fmt: skip


def _bucket_seconds(df: DataFrame) -> int:
    lo, hi = df.agg(F.min("timestamp"), F.max("timestamp")).first()
    if lo is None:
        return _BUCKETS_S[0]
    span = (hi - lo).total_seconds()
    return next((b for b in _BUCKETS_S if span / b <= _MAX_POINTS), _BUCKETS_S[-1])


def write_parquet(stats: Stats, out_dir: str | Path) -> list[Path]:
    """One Parquet file per table (aggregates are small: the driver writes them)."""
    folder = Path(out_dir) / "stats"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in stats.tables().items():
        path = folder / f"{name}.parquet"
        table.to_parquet(path, index=False)
        written.append(path)
    return written
