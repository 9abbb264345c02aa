"""Kafka's RequestMetrics for one broker: per API, the requests handled and a histogram of their
total time (decode to encoded response, purgatory waits included), for `GET /metrics`."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# Upper bounds (ms) of the latency histogram's buckets; one more bucket takes everything above.
LATENCY_BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
                      1000.0, 2500.0, 5000.0, 10000.0, 30000.0)


@dataclass(slots=True)
class ApiTimes:
    """One API's request count and latency histogram."""
    count: int = 0
    sum_ms: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))


class RequestMetrics:
    def __init__(self) -> None:
        self.apis: dict[str, ApiTimes] = {}
        # Record bytes of fetch responses sent from the segment files (sendfile), and those of
        # file regions that had to be copied (the socket was full, or the connection is TLS)
        self.bytes_sent_from_files = 0
        self.bytes_copied_from_files = 0

    def record(self, api: str, total_ms: float) -> None:
        times = self.apis.get(api)
        if times is None:
            times = self.apis[api] = ApiTimes()
        times.count += 1
        times.sum_ms += total_ms
        times.buckets[bisect.bisect_left(LATENCY_BUCKETS_MS, total_ms)] += 1

    def snapshot(self) -> dict[str, dict]:
        """Per API: count, sum_ms and buckets, [upper bound in ms, requests at or below it]
        (Prometheus' cumulative `le` buckets; the last bound is infinity)."""
        bounds = [*LATENCY_BUCKETS_MS, float("inf")]
        out = {}
        for api, times in sorted(self.apis.items()):
            cumulative, total = [], 0
            for bound, n in zip(bounds, times.buckets, strict=True):
                total += n
                cumulative.append([bound, total])
            out[api] = {"count": times.count, "sum_ms": times.sum_ms, "buckets": cumulative}
        return out
