"""The statistics job: its numbers against the produced workload, its Parquet files, its HTML report."""

from __future__ import annotations

import base64
import re
from collections import Counter, defaultdict

import pandas as pd
import pytest

from pipeline import cli


@pytest.fixture(scope="module")
def stats_out(spark, produced, tmp_path_factory):
    out = tmp_path_factory.mktemp("stats")
    code = cli.main(["stats", "--data-dir", str(produced.data_dir), "--out", str(out), "--no-progress"])
    assert code == 0
    return out


def _expected_partitions(produced) -> dict:
    want: dict = defaultdict(lambda: {"records": 0, "bytes": 0, "keys": set(), "null_keys": 0})
    for (topic, partition, _), r in produced.records.items():
        entry = want[(topic, partition)]
        entry["records"] += 1
        entry["bytes"] += len(r.key or b"") + len(r.value or b"")
        if r.key is None:
            entry["null_keys"] += 1
        else:
            entry["keys"].add(r.key)
    return want


def test_partition_numbers_equal_what_was_produced(produced, stats_out):
    table = pd.read_parquet(stats_out / "stats" / "partitions.parquet")
    want = _expected_partitions(produced)
    assert len(table) == len(want) == 4
    for row in table.itertuples():
        entry = want[(row.topic, row.partition)]
        assert (row.records, row.bytes, row.keys, row.null_keys) == (
            entry["records"], entry["bytes"], len(entry["keys"]), entry["null_keys"]
        ), (row.topic, row.partition)  # fmt: skip
        offsets = [o for t, p, o in produced.records if (t, p) == (row.topic, row.partition)]
        assert (row.first_offset, row.last_offset) == (min(offsets), max(offsets))
        assert row.log_bytes == sum(
            f.stat().st_size for f in (produced.data_dir / f"{row.topic}-{row.partition}").glob("*.log")
        )
    orders = table[table["topic"] == "orders"]
    assert all(sorted(c) == ["gzip", "lz4", "none", "snappy", "zstd"] for c in orders["codecs"])


def test_topics_sizes_rates_and_producers(produced, stats_out):
    folder = stats_out / "stats"
    topics = pd.read_parquet(folder / "topics.parquet").set_index("topic")
    for topic in ("orders", "events"):
        records = [r for (t, _, _), r in produced.records.items() if t == topic]
        assert topics.loc[topic, "records"] == len(records)
        assert topics.loc[topic, "keys"] == len({r.key for r in records if r.key is not None})
        assert topics.loc[topic, "max_value_size"] == max(len(r.value) for r in records)
    sizes = pd.read_parquet(folder / "sizes.parquet")
    want = Counter((t, 1 << (len(r.value).bit_length() - 1) if r.value else 0)
                   for (t, _, _), r in produced.records.items())  # fmt: skip
    assert dict(zip(zip(sizes["topic"], sizes["size_bucket"], strict=False), sizes["records"], strict=True)) == want
    rates = pd.read_parquet(folder / "rates.parquet")
    assert rates.groupby("topic")["records"].sum().to_dict() == {
        "orders": produced.count("orders"), "events": produced.count("events")
    }  # fmt: skip
    producers = pd.read_parquet(folder / "producers.parquet")
    assert len(producers) == 1  # the idempotent one; the others write producer id -1
    assert producers.loc[0, "records"] == produced.count("events")
    assert list(producers.loc[0, "topics"]) == ["events"]
    assert (producers.loc[0, "min_sequence"], producers.loc[0, "max_sequence"]) == (
        0, produced.count("events") - 1
    )  # fmt: skip


def test_html_report_is_self_contained_with_plots(stats_out):
    html = (stats_out / "report.html").read_text()
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == 3
    assert all(base64.b64decode(i).startswith(b"\x89PNG\r\n\x1a\n") for i in images)
    assert "http://" not in html and "https://" not in html  # nothing fetched when opened
    for heading in ("Topics", "Rates over time", "Message sizes", "Partitions", "Producers"):
        assert f"<h2>{heading}</h2>" in html


def test_report_renders_missing_values_as_empty_cells():
    """A list column holding NaN, nullable integers and NaT (what a join with idle partitions
    yields) render as empty cells instead of failing or printing nan/<NA>/NaT."""
    from pipeline.report import render_html
    from pipeline.stats import Stats

    partitions = pd.DataFrame({
        "topic": ["t", "t"], "partition": [0, 1], "records": [3, 0],
        "first_offset": pd.array([0, None], dtype="Int64"),
        "first_timestamp": pd.to_datetime(["2026-01-01 10:00:00.123", None]),
        "codecs": [["gzip", "lz4"], float("nan")],
    })  # fmt: skip
    empty = pd.DataFrame({"topic": pd.Series([], dtype=object)})
    stats = Stats(topics=empty.assign(records=pd.Series([], dtype="int64")), partitions=partitions,
                  rates=empty.assign(window_start=pd.Series([], dtype="datetime64[ns]"),
                                     records=pd.Series([], dtype="int64")),
                  sizes=empty.assign(size_bucket=pd.Series([], dtype="int64"),
                                     records=pd.Series([], dtype="int64")),
                  producers=pd.DataFrame(), bucket_seconds=1)  # fmt: skip
    html = render_html(stats, "somewhere")
    assert "<td>gzip, lz4</td>" in html and "<td>2026-01-01 10:00:00.123</td>" in html
    assert not re.search(r"<td>(nan|NaN|NaT|&lt;NA&gt;)</td>", html)
