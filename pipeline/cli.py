"""`kafka-sim pipeline audit|stats --data-dir DIR [--master URL] [--out DIR]`."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import warnings

# What the `pipeline` extra brings (pyproject.toml) and the jobs import: checked before any of
# them is imported so that a base install gets one line of advice, not a traceback.
EXTRA_MODULES = ("pyspark", "pyarrow", "pandas", "numpy", "matplotlib")
INSTALL_HINT = "run 'make pipeline' (or pip install -e '.[pipeline]')"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-sim pipeline",
        description="Spark jobs over a kafka-sim data directory (one broker's or a whole cluster's).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, what in (("audit", "check CRCs, offsets, replicas and producer sequences"),
                       ("stats", "write per topic/partition statistics as Parquet and HTML")):  # fmt: skip
        sub = commands.add_parser(name, help=what, description=what)
        sub.add_argument("--data-dir", required=True,
                         help="a broker's log.dirs (comma-separated when several), or a folder holding "
                              "one per broker (or several such folders)")
        sub.add_argument("--master", default="local[*]",
                         help="Spark master URL (default local[*]); e.g. spark://host:7077")
        sub.add_argument("--out", default="pipeline-out", help="output folder (default ./pipeline-out)")
        sub.add_argument("--no-progress", action="store_true", help="hide Spark's progress bar")
    return parser


def missing_modules(names: tuple[str, ...] = EXTRA_MODULES) -> list[str]:
    """The modules among `names` that cannot be imported (without importing any of them)."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except ValueError:  # in sys.modules without a __spec__: imported already, so importable
            found = True
        except ImportError:  # a dotted name whose parent cannot be imported
            found = False
        if not found:  # also a None entry in sys.modules, which makes `import name` fail
            missing.append(name)
    return missing


def _extra_missing() -> str | None:
    """One line saying what to install when the pipeline extra is absent, else None."""
    missing = missing_modules()
    if not missing:
        return None
    what = "PySpark is not installed" if "pyspark" in missing else "the pipeline extra is incomplete"
    return f"pipeline: {what} (missing {', '.join(missing)}); {INSTALL_HINT}"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    # After parsing, so that --help and usage errors still answer without the extra.
    problem = _extra_missing()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    # PySpark 4 warns on every toPandas() under pandas 3; our conversions are flat tables.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    # Spark is imported here so that `--help` and argument errors answer at once.
    from pipeline.layout import find_brokers
    from pipeline.session import spark_session

    try:
        brokers = find_brokers(args.data_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"pipeline: {exc}", file=sys.stderr)
        return 2
    if not brokers:
        print(f"pipeline: no broker directory (with meta.properties) in {args.data_dir}",
              file=sys.stderr)  # fmt: skip
        return 2
    from pyspark.sql import SparkSession

    started = time.monotonic()
    borrowed = SparkSession.getActiveSession() is not None  # e.g. a test's: not ours to stop
    spark = spark_session(args.master, f"kafka-sim-{args.command}", progress=not args.no_progress)
    try:
        return _audit(spark, args) if args.command == "audit" else _stats(spark, args)
    finally:
        print(f"pipeline {args.command}: {time.monotonic() - started:.1f} s", file=sys.stderr)
        if not borrowed:
            spark.stop()


def _audit(spark, args) -> int:
    from pipeline.audit import run_audit, write_audit_json

    result = run_audit(spark, args.data_dir)
    path = write_audit_json(result, args.data_dir, args.out)
    for v in result.violations[:20]:
        print(f"  {v.kind}: {v.topic}-{v.partition} replica {v.replica} offset {v.offset}: {v.detail}")
    if len(result.violations) > 20:
        print(f"  ... and {len(result.violations) - 20} more in {path}")
    print(result.summary())
    return 1 if result.violations else 0


def _stats(spark, args) -> int:
    from pipeline.report import write_html
    from pipeline.stats import run_stats, write_parquet

    stats = run_stats(spark, args.data_dir)
    tables = write_parquet(stats, args.out)
    report = write_html(stats, args.data_dir, args.out)
    records = int(stats.topics["records"].sum()) if len(stats.topics) else 0
    print(f"stats: {len(stats.topics)} topics, {len(stats.partitions)} partitions, {records} records")
    print(f"  report: {report}")
    print(f"  parquet: {tables[0].parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
