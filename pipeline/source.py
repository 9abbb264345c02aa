"""The `kafka-sim-log` Spark data source: one input partition per segment file, Arrow batches out.

Options: `path` (a broker's or a whole cluster's data directory), `level` (`records`, the default,
or `batches`: one row per record batch, no decompression), `columns` (comma-separated projection;
leaving out key/value/headers skips building them, since Spark 4's Python data sources get no
column pruning from the planner), `copies` (`all`, the default, or `one`: a single replica per
topic-partition, for statistics). Filters on broker_id/topic/partition skip whole segment files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

try:  # filter pushdown arrived in Spark 4.1; on 4.0 pushFilters is simply never called
    from pyspark.sql.datasource import EqualTo, In
except ImportError:  # pragma: no cover
    EqualTo = In = type(None)

FORMAT = "kafka-sim-log"

_HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
RECORD_SCHEMA = StructType([
    StructField("broker_id", IntegerType(), False),  # the replica: node.id of the broker directory
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("segment", LongType(), False),  # the segment file's base offset
    StructField("offset", LongType(), False),
    StructField("timestamp", TimestampType()),
    StructField("timestamp_type", StringType()),  # CreateTime | LogAppendTime
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("headers", ArrayType(_HEADER)),
    StructField("producer_id", LongType()),
    StructField("producer_epoch", IntegerType()),
    StructField("sequence", IntegerType()),  # baseSequence + offset delta; -1 without a producer id
    StructField("is_transactional", BooleanType()),
    StructField("is_control", BooleanType()),
    StructField("compression", StringType()),  # none | gzip | snappy | lz4 | zstd
    StructField("crc_valid", BooleanType()),  # the batch's CRC-32C holds
])  # fmt: skip
# Not in the default schema; ask for them with the `columns` option (stats uses them).
RECORD_EXTRA = StructType([
    StructField("key_size", IntegerType()),  # -1 for a null key
    StructField("value_size", IntegerType()),
])  # fmt: skip

BATCH_SCHEMA = StructType([
    StructField("broker_id", IntegerType(), False),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("segment", LongType(), False),
    StructField("position", LongType()),  # byte position in the segment file
    StructField("base_offset", LongType()),
    StructField("last_offset", LongType()),
    StructField("record_count", IntegerType()),
    StructField("size", IntegerType()),
    StructField("partition_leader_epoch", IntegerType()),
    StructField("magic", IntegerType()),
    StructField("crc_valid", BooleanType()),
    StructField("digest", BinaryType()),  # BLAKE2b-128 of the whole batch: replicas compare these
    StructField("base_timestamp", LongType()),  # epoch milliseconds
    StructField("max_timestamp", LongType()),
    StructField("timestamp_type", StringType()),
    StructField("producer_id", LongType()),
    StructField("producer_epoch", IntegerType()),
    StructField("base_sequence", IntegerType()),
    StructField("is_transactional", BooleanType()),
    StructField("is_control", BooleanType()),
    StructField("compression", StringType()),
])  # fmt: skip

_PRUNABLE = ("broker_id", "topic", "partition")


@dataclass
class SegmentPartition(InputPartition):
    replica: int
    topic: str
    partition: int
    base_offset: int
    path: str

    def __post_init__(self) -> None:
        self.value = self.path


def _schema_for(options: dict[str, str]) -> StructType:
    level = options.get("level", "records")
    if level not in ("records", "batches"):
        raise ValueError(f"option level must be records or batches, not {level!r}")
    full = BATCH_SCHEMA if level == "batches" else StructType(RECORD_SCHEMA.fields + RECORD_EXTRA.fields)
    base = BATCH_SCHEMA if level == "batches" else RECORD_SCHEMA
    names = [c.strip() for c in options.get("columns", "").split(",") if c.strip()]
    if not names:
        return base
    unknown = [n for n in names if n not in full.fieldNames()]
    if unknown:
        raise ValueError(f"unknown columns {unknown}; known: {full.fieldNames()}")
    return StructType([f for f in full.fields if f.name in names])


class KafkaSimLogDataSource(DataSource):
    """spark.read.format("kafka-sim-log").option("path", DIR).load()"""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return _schema_for(dict(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"{FORMAT} needs option path (a broker or cluster data directory)")
        copies = self.options.get("copies", "all")
        if copies not in ("all", "one"):
            raise ValueError(f"option copies must be all or one, not {copies!r}")
        return KafkaSimLogReader(path, self.options.get("level", "records"), schema, copies)


class KafkaSimLogReader(DataSourceReader):
    def __init__(self, path: str, level: str, schema: StructType, copies: str = "all") -> None:
        self.path = path
        self.copies = copies
        self.level = level
        self.schema = schema
        self.allowed: dict[str, set] = {}  # pushed-down equality filters, per prunable column

    def pushFilters(self, filters: list) -> Iterator:  # noqa: N802 (Spark's name)
        for f in filters:
            path = getattr(f, "attribute", ())  # Not(...) has a child filter instead
            column = path[0] if len(path) == 1 else None
            if column in _PRUNABLE and isinstance(f, EqualTo | In):
                values = {f.value} if isinstance(f, EqualTo) else set(f.value)
                previous = self.allowed.get(column)
                self.allowed[column] = values if previous is None else previous & values
            else:
                yield f

    def partitions(self) -> list[InputPartition]:
        from pipeline.layout import find_replicas, one_copy

        replicas = find_replicas(self.path)
        if self.copies == "one":
            replicas = one_copy(replicas)
        segments = [
            s for r in replicas for s in r.segments
            if s.size > 0 and all(
                getattr(s, "replica" if col == "broker_id" else col) in values
                for col, values in self.allowed.items()
            )
        ]  # fmt: skip
        # Largest first, so that a big segment does not start last and stretch the job.
        segments.sort(key=lambda s: -s.size)
        parts: list[InputPartition] = [
            SegmentPartition(s.replica, s.topic, s.partition, s.base_offset, s.path)
            for s in segments
        ]
        return parts or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        from pipeline import decode

        if not isinstance(partition, SegmentPartition):
            return
        with open(partition.path, "rb") as f:
            buf = f.read()
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        where = (partition.replica, partition.topic, partition.partition, partition.base_offset)
        if self.level == "batches":
            cols = decode.batch_rows(buf, *where)
            if cols["position"]:
                arrays = [pa.array(cols[f.name], f.type) for f in arrow_schema]
                yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
            return
        yield from decode.record_batches(buf, arrow_schema, decode.segment_constants(*where))


def register(spark) -> None:
    """Make `spark.read.format("kafka-sim-log")` available in this session."""
    spark.dataSource.register(KafkaSimLogDataSource)
