"""Storage benchmark: Log append throughput (100 B and 10 KB batches), sequential reads, recovery.

Run: .venv/bin/python tests/bench/bench_storage.py [--mb 64]
Appends go through append_as_leader (validation, CRC check, offset stamping, index upkeep, write).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without install

from protocol.records import (  # noqa: E402
    HEADER_SIZE,
    encode_batch,
    iter_batches,
    read_batch_header,
)
from storage.log import Log  # noqa: E402
from storage.log_config import LogConfig  # noqa: E402

CONFIG = LogConfig(segment_bytes=64 * 1024 * 1024)


def now_ms() -> int:
    return int(time.time() * 1000)


def make_batch(total_size: int) -> bytes:
    """One record with its value sized so the whole batch is about `total_size` bytes."""
    value = b"v" * max(total_size - HEADER_SIZE - 10, 1)
    return encode_batch([(None, value, [], now_ms())])


def bench_append(folder: Path, batch_size: int, total_mb: int) -> Log:
    log = Log.open(folder, CONFIG, now_ms=now_ms)
    batch = make_batch(batch_size)
    count = total_mb * 1024 * 1024 // len(batch)
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, 0)
    log.flush()
    elapsed = time.perf_counter() - start
    mb = count * len(batch) / 1e6
    print(
        f"append {len(batch):>6} B batches: {count:>8} batches in {elapsed:6.2f} s"
        f"  {count / elapsed:>10,.0f} batches/s  {mb / elapsed:8.1f} MB/s"
        f"  ({len(log.segments)} segments)"
    )
    return log


def bench_read(log: Log, fetch_bytes: int, label: str) -> None:
    """Consumer-style sequential reads; only Log.read is timed, not finding the next offset."""
    offset, total, fetches, elapsed = log.log_start_offset, 0, 0, 0.0
    while offset < log.log_end_offset:
        start = time.perf_counter()
        data = log.read(offset, fetch_bytes).records
        elapsed += time.perf_counter() - start
        total += len(data)
        fetches += 1
        last = max(pos for pos, _ in iter_batches(data))
        offset = read_batch_header(data, last).next_offset
    print(
        f"read {label} log, {fetch_bytes // 1024:>4} KB fetches: {fetches:>6} fetches in {elapsed:6.2f} s"
        f"  {fetches / elapsed:>10,.0f} fetches/s  {total / 1e6 / elapsed:8.1f} MB/s"
    )


def bench_recovery(folder: Path, label: str) -> None:
    start = time.perf_counter()
    log = Log.open(folder, CONFIG, now_ms=now_ms, recovery_point=0)  # unclean: full CRC scan
    elapsed = time.perf_counter() - start
    mb = log.size_in_bytes / 1e6
    print(
        f"recover {label} log (CRC scan, index rebuild): {mb:8.1f} MB in {elapsed:6.2f} s  {mb / elapsed:8.1f} MB/s"
    )
    log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=64, help="megabytes appended per case")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = bench_append(Path(tmp) / "small-0", 100, max(args.mb // 8, 1))
        large = bench_append(Path(tmp) / "large-0", 10 * 1024, args.mb)
        bench_read(small, 1024 * 1024, "100 B")
        bench_read(large, 1024 * 1024, "10 KB")
        bench_read(small, 64 * 1024, "100 B")
        bench_read(large, 64 * 1024, "10 KB")
        small.close()
        large.close()
        bench_recovery(Path(tmp) / "small-0", "100 B")
        bench_recovery(Path(tmp) / "large-0", "10 KB")


if __name__ == "__main__":
    main()
