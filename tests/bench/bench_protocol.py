"""Protocol codec benchmark: Produce v9 request decode, Fetch v12 response encode, interpreted vs compiled.

Run: .venv/bin/python tests/bench/bench_protocol.py
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without install

from construct import Container  # noqa: E402

from protocol import decode_request, encode_request, encode_response  # noqa: E402
from protocol.schema import codec  # noqa: E402
from protocol.types import Reader  # noqa: E402

RECORDS = b"\x00" * 200  # opaque to the codec


def produce_v9() -> dict:
    return {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [
            {"name": f"topic-{t}", "partition_data": [{"index": p, "records": RECORDS} for p in range(4)]}
            for t in range(2)
        ],
    }


def fetch_v12_response() -> dict:
    partitions = [
        {"partition_index": p, "error_code": 0, "high_watermark": 1000 + p, "last_stable_offset": 1000 + p,
         "log_start_offset": 0, "aborted_transactions": [], "preferred_read_replica": -1, "records": RECORDS}
        for p in range(8)
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": "topic-0", "partitions": partitions}]}


def per_call_us(fn: Callable[[], object], rounds: int = 7, budget_s: float = 0.1) -> float:
    """Best of `rounds` timings (other processes share the machine), microseconds per call."""
    best = float("inf")
    for _ in range(rounds):
        n, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < budget_s:
            for _ in range(100):
                fn()
            n += 100
        best = min(best, elapsed / n * 1e6)
    return best


def main() -> None:
    produce = codec(0, 9, "request")
    body = encode_request(0, 9, produce_v9())
    fetch = codec(1, 12, "response")
    fetch_body = fetch_v12_response()
    assert produce.parse(body) == produce.parse_interpreted(body)
    rows = [
        ("Produce v9 request decode (2 topics x 4 partitions), interpreted",
         lambda: produce.interpreted._parsereport(Reader(body), Container(), "")),
        ("Produce v9 request decode, compiled", lambda: produce.parse(body)),
        ("Produce v9 request decode, decode_request()", lambda: decode_request(0, 9, body)),
        ("Fetch v12 response encode (8 partitions), interpreted",
         lambda: fetch.interpreted._build(fetch_body, io.BytesIO(), Container(), "")),
        ("Fetch v12 response encode, compiled", lambda: fetch.compiled.buildfunc(fetch_body, io.BytesIO(), None)),
        ("Fetch v12 response encode, encode_response()", lambda: encode_response(1, 12, fetch_body)),
    ]
    for label, fn in rows:
        print(f"{label:<70} {per_call_us(fn):8.1f} us")


if __name__ == "__main__":
    main()
