"""Pipeline benchmark: records/s read by the kafka-sim-log data source with local[1] and local[2].

Run: .venv/bin/python tests/bench/bench_pipeline.py [--quick] [--gb 1.0] [--codec none|gzip|snappy|lz4|zstd]
Generates a log of the given size (4 partitions, 128 MiB segments) and reads it back three ways:
every column (record view), the stats projection (no key/value bytes), and the batch view (audit).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without install

from protocol.records import assign_offsets, encode_batch  # noqa: E402
from storage.naming import log_file  # noqa: E402

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PARTITIONS = 4
SEGMENT_BYTES = 128 * 1024 * 1024


def generate(root: Path, total_bytes: int, codec: int, value_size: int, per_batch: int) -> int:
    """Write a broker directory of about total_bytes; returns the number of records written."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "meta.properties").write_text("version=1\ncluster.id=bench\nnode.id=0\n")
    rng = random.Random(1)
    now = int(time.time() * 1000)
    # Half random, half repeated: compressible the way JSON-ish payloads are.
    templates = []
    for t in range(8):
        rows = [(f"key-{t}-{i}".encode(),
                 rng.randbytes(value_size // 2) + bytes([i % 256]) * (value_size - value_size // 2),
                 [("source", b"bench")], now + i) for i in range(per_batch)]  # fmt: skip
        templates.append(encode_batch(rows, compression=codec, producer_id=-1))
    records = 0
    per_partition = total_bytes // PARTITIONS
    for p in range(PARTITIONS):
        folder = root / f"bench-{p}"
        folder.mkdir(parents=True)
        offset, written, segment_base, out, chunks = 0, 0, 0, None, []
        while written < per_partition:
            if out is None or out.tell() + sum(map(len, chunks)) >= SEGMENT_BYTES:
                if out is not None:
                    out.write(b"".join(chunks))
                    out.close()
                chunks, segment_base = [], offset
                out = open(log_file(folder, segment_base), "wb")  # noqa: SIM115
            batch = bytearray(templates[(offset // per_batch) % len(templates)])
            assign_offsets(batch, 0, offset, 0)  # outside the CRC: the template stays valid
            chunks.append(bytes(batch))
            if len(chunks) >= 256:
                out.write(b"".join(chunks))
                chunks = []
            offset += per_batch
            written += len(batch)
        out.write(b"".join(chunks))
        out.close()
        records += offset
    return records


def measure(master: str, data_dir: Path, records: int, size: int) -> None:
    from pyspark.sql import functions as F

    from pipeline.session import spark_session

    spark = spark_session(master, "kafka-sim-bench", progress=False, conf={"spark.ui.enabled": "false"})

    def load(**options):  # a fresh reader each time: DataFrameReader options accumulate
        reader = spark.read.format("kafka-sim-log").option("path", str(data_dir))
        for name, value in options.items():
            reader = reader.option(name, value)
        return reader.load()

    runs = {
        "all columns": lambda: load().agg(
            F.count("*"), F.sum(F.length("value")), F.sum(F.size("headers"))).first(),
        "stats projection": lambda: load(
            columns="topic,partition,offset,timestamp,key,value_size").agg(
            F.count("*"), F.sum("value_size")).first(),
        "batch view": lambda: load(level="batches").agg(F.sum("record_count")).first(),
    }  # fmt: skip
    started = time.perf_counter()
    load(columns="offset").count()  # warm-up: JVM JIT, Python workers, imports
    print(f"  {master:9s} warm-up query {time.perf_counter() - started:.1f} s", flush=True)
    for name, run in runs.items():
        started = time.perf_counter()
        result = run()
        elapsed = time.perf_counter() - started
        assert result[0] == records, (name, result[0], records)
        print(f"  {master:9s} {name:17s} {records / elapsed:>12,.0f} records/s "
              f"{size / elapsed / 1e6:>8,.1f} MB/s  ({elapsed:.1f} s)", flush=True)  # fmt: skip
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="log size in GB (default 1.0)")
    parser.add_argument("--quick", action="store_true", help="a 100 MB log instead")
    parser.add_argument("--codec", choices=CODECS, default="lz4")
    parser.add_argument("--value-size", type=int, default=512)
    parser.add_argument("--batch-records", type=int, default=64)
    parser.add_argument("--dir", help="where to generate (default: a temporary folder, removed)")
    parser.add_argument("--masters", default="local[1],local[2]")
    args = parser.parse_args()
    total = int((0.1 if args.quick else args.gb) * 1e9)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kafka-sim-bench-"))
    try:
        started = time.perf_counter()
        records = generate(root, total, CODECS[args.codec], args.value_size, args.batch_records)
        size = sum(f.stat().st_size for f in root.rglob("*.log"))
        print(f"generated {size / 1e6:,.0f} MB, {records:,} records ({args.codec}, "
              f"{args.value_size}-byte values, {args.batch_records} per batch) "
              f"in {time.perf_counter() - started:.1f} s")  # fmt: skip
        for master in args.masters.split(","):
            measure(master, root, records, size)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
