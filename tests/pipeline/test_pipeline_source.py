"""The kafka-sim-log data source read back against what real clients produced, field by field."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, In

from pipeline.source import FORMAT, RECORD_SCHEMA, KafkaSimLogReader, SegmentPartition
from storage.naming import parse_segment_file


def _read(spark, path, **options):
    reader = spark.read.format(FORMAT).option("path", str(path))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _ms(ts: datetime) -> int:
    # Spark hands back naive local datetimes; .timestamp() reads them as local time: epoch ms again.
    return round(ts.timestamp() * 1000)


def test_every_produced_record_field_by_field(spark, produced):
    rows = _read(spark, produced.data_dir).collect()
    assert len(rows) == len(produced.records) == 5 * 150 + 400
    by_key = {(r.topic, r.partition, r.offset): r for r in rows}
    assert by_key.keys() == produced.records.keys()
    for where, want in produced.records.items():
        row = by_key[where]
        assert row.broker_id == 0, where
        assert row.key == want.key and row.value == want.value, where
        assert [(h.key, h.value) for h in row.headers] == want.headers, where
        assert _ms(row.timestamp) == want.timestamp and row.timestamp_type == "CreateTime", where
        assert row.compression == want.codec, where
        assert row.crc_valid and not row.is_control and not row.is_transactional, where
        assert row.segment <= row.offset, where
        if want.idempotent:
            assert row.producer_id >= 0 and row.producer_epoch >= 0, where
        else:
            assert row.producer_id == -1 and row.sequence == -1, where
    # An idempotent producer numbers its records 0, 1, 2... per partition, in offset order.
    events = sorted((r for r in rows if r.topic == "events"), key=lambda r: r.offset)
    assert [r.sequence for r in events] == list(range(len(events)))
    assert len({r.producer_id for r in events}) == 1


def test_one_input_partition_per_segment_file(produced):
    log_files = sorted(
        p for p in produced.data_dir.glob("*-*/*.log") if parse_segment_file(p.name) and p.stat().st_size
    )
    reader = KafkaSimLogReader(str(produced.data_dir), "records", RECORD_SCHEMA)
    parts = reader.partitions()
    assert all(isinstance(p, SegmentPartition) for p in parts)
    assert sorted(p.path for p in parts) == [str(p) for p in log_files]
    for partition in range(3):  # the workload is sized so that every partition rolled
        assert len(list(produced.data_dir.glob(f"orders-{partition}/*.log"))) >= 2


def test_segment_column_is_the_file_base_offset(spark, produced):
    seen = _read(spark, produced.data_dir, columns="topic,partition,segment,offset").groupBy(
        "topic", "partition", "segment"
    ).agg(F.min("offset").alias("first")).collect()
    for row in seen:
        assert (produced.data_dir / f"{row.topic}-{row.partition}" / f"{row.segment:020d}.log").exists()
        assert row.first >= row.segment


def test_filters_on_topic_and_partition_skip_segments(spark, produced):
    reader = KafkaSimLogReader(str(produced.data_dir), "records", RECORD_SCHEMA)
    kept = list(reader.pushFilters([EqualTo(("topic",), "orders"), In(("partition",), (1, 2)),
                                    EqualTo(("offset",), 3)]))  # fmt: skip
    assert [type(f) for f in kept] == [EqualTo] and kept[0].attribute == ("offset",)
    parts = reader.partitions()
    assert parts and {(p.topic, p.partition) for p in parts} == {("orders", 1), ("orders", 2)}
    df = _read(spark, produced.data_dir).where("topic = 'orders' AND partition = 2")
    assert df.count() == produced.count("orders", 2)


def test_columns_option_projects_and_adds_sizes(spark, produced):
    df = _read(spark, produced.data_dir, columns="topic,partition,offset,key_size,value_size")
    assert df.columns == ["topic", "partition", "offset", "key_size", "value_size"]
    for row in df.collect():
        want = produced.records[(row.topic, row.partition, row.offset)]
        assert row.value_size == len(want.value)
        assert row.key_size == (-1 if want.key is None else len(want.key))


def test_batch_level_view_counts_every_record(spark, produced):
    batches = _read(spark, produced.data_dir, level="batches")
    totals = batches.agg(F.sum("record_count"), F.min(F.col("crc_valid").cast("int"))).first()
    assert totals[0] == len(produced.records) and totals[1] == 1
    assert {r.compression for r in batches.select("compression").distinct().collect()} == {
        "none", "gzip", "snappy", "lz4", "zstd"
    }


def test_edge_cases_written_by_storage(spark, synthetic):
    rows = {(r.topic, r.offset): r for r in _read(spark, synthetic.data_dir).collect()}
    assert len(rows) == len(synthetic.records)
    null_row, empty_row = rows[("edge", 0)], rows[("edge", 1)]
    assert null_row.key is None and null_row.value is None
    assert [(h.key, h.value) for h in null_row.headers] == [("h", None)]
    assert empty_row.key == b"k" and empty_row.value == b"" and empty_row.headers == []
    assert null_row.broker_id == 7 and null_row.is_transactional and null_row.producer_id == 42
    assert (null_row.producer_epoch, null_row.sequence, empty_row.sequence) == (3, 0, 1)
    stamped = rows[("stamped", 0)]
    want = synthetic.records[("stamped", 0, 0)]
    assert stamped.timestamp_type == "LogAppendTime" and _ms(stamped.timestamp) == want.timestamp
