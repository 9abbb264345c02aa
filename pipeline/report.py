"""A self-contained HTML report of the statistics: tables plus matplotlib plots inlined as PNG."""

from __future__ import annotations

import base64
import html
import io
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from pipeline.stats import Stats  # noqa: E402

# Every plot a report holds, by its alt text, in report order (the tests count them by this).
PLOTS = {"rates": "records per second over time", "sizes": "message size distribution",
         "partitions": "records per partition"}  # fmt: skip

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(fig, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{_png(fig)}">'


def _legend(ax, artists: dict) -> None:
    """One entry per topic. Labels are passed explicitly: matplotlib drops automatic labels that
    start with "_" (its "leave me out" convention), and with them __consumer_offsets."""
    if artists:
        ax.legend(list(artists.values()), list(artists), fontsize="small")


def _rates_plot(rates: pd.DataFrame, bucket_seconds: int) -> str:
    fig, ax = plt.subplots(figsize=(10, 4))
    lines = {topic: ax.plot(group["window_start"], group["records"] / bucket_seconds, marker=".")[0]
             for topic, group in rates.groupby("topic")}  # fmt: skip
    ax.set_title(f"Records per second ({bucket_seconds} s buckets, by record timestamp)")
    ax.set_ylabel("records/s")
    _legend(ax, lines)
    fig.autofmt_xdate()
    return _img(fig, PLOTS["rates"])


def _sizes_plot(sizes: pd.DataFrame) -> str:
    fig, ax = plt.subplots(figsize=(10, 4))
    buckets = sorted(sizes["size_bucket"].unique()) if len(sizes) else []
    positions = {b: i for i, b in enumerate(buckets)}
    topics = sorted(sizes["topic"].unique()) if len(sizes) else []
    width = 0.8 / max(len(topics), 1)
    bars = {}
    for i, topic in enumerate(topics):
        group = sizes[sizes["topic"] == topic]
        xs = [positions[b] + i * width for b in group["size_bucket"]]
        bars[topic] = ax.bar(xs, group["records"], width=width)
    ax.set_xticks([positions[b] + 0.4 - width / 2 for b in buckets])
    ax.set_xticklabels([_size_label(b) for b in buckets], rotation=45)
    ax.set_title("Message (value) size distribution")
    ax.set_ylabel("records")
    _legend(ax, bars)
    return _img(fig, PLOTS["sizes"])


def _size_label(lower: int) -> str:
    if lower == 0:
        return "0"
    return f"{lower}-{2 * lower - 1} B" if lower < 1024 else f"{lower // 1024}-{2 * lower // 1024} KiB"


def _partitions_plot(partitions: pd.DataFrame) -> str:
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.3 * len(partitions))))
    labels = [f"{t}-{p}" for t, p in zip(partitions["topic"], partitions["partition"], strict=True)]
    ax.barh(labels, partitions["records"])
    ax.invert_yaxis()
    ax.set_title("Records per partition")
    ax.set_xlabel("records")
    return _img(fig, PLOTS["partitions"])


def _joined(value: object) -> object:
    """A list cell (codecs, epochs, topics) as "a, b"; anything else as is."""
    return ", ".join(map(str, value)) if pd.api.types.is_list_like(value) else value


def _timestamp(value: pd.Timestamp) -> str:
    return "" if pd.isna(value) else value.isoformat(sep=" ", timespec="milliseconds")


def _shown(column: pd.Series) -> pd.Series:
    """A column as the table shows it: lists joined, missing values (an empty partition's
    offsets and times) as empty cells; to_html's na_rep covers float NaN only, not NaT or <NA>."""
    if any(pd.api.types.is_list_like(v) for v in column):  # not .map(): an empty column keeps its dtype
        return column.map(_joined)
    if pd.api.types.is_datetime64_any_dtype(column):
        return column.map(_timestamp)
    if not pd.api.types.is_float_dtype(column) and column.isna().any():
        return column.astype(object).where(column.notna(), "")
    return column


def _table(df: pd.DataFrame) -> str:
    shown = pd.DataFrame({column: _shown(df[column]) for column in df.columns})
    return shown.to_html(index=False, na_rep="", float_format=lambda x: f"{x:,.1f}", border=0)


def render_html(stats: Stats, data_dir: str | Path) -> str:
    total = int(stats.topics["records"].sum()) if len(stats.topics) else 0
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>kafka-sim stats: {html.escape(str(data_dir))}</title><style>{_CSS}</style></head><body>",
        "<h1>kafka-sim log statistics</h1>",
        f"<p>Data directory <code>{html.escape(str(Path(data_dir).resolve()))}</code>, generated "
        f"{now}. {total:,} records in {len(stats.partitions)} partitions (one replica each; "
        "control records excluded).</p>",
        "<h2>Topics</h2>", _table(stats.topics),
        "<h2>Rates over time</h2>", _rates_plot(stats.rates, stats.bucket_seconds),
        "<h2>Message sizes</h2>", _sizes_plot(stats.sizes),
        "<h2>Partitions</h2>", _partitions_plot(stats.partitions), _table(stats.partitions),
        "<h2>Producers</h2>",
        _table(stats.producers) if len(stats.producers) else "<p>No idempotent or transactional producers.</p>",
        "</body></html>",
    ]  # fmt: skip
    return "\n".join(parts)


def write_html(stats: Stats, data_dir: str | Path, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    path.write_text(render_html(stats, data_dir), encoding="utf-8")
    return path
