"""A quota's rate as Kafka's metrics measure it (SampledStat + Rate): `samples` windows of
`window_ms`, the oldest reused as time moves on, the rate over the time they span."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(slots=True)
class Sample:
    """One window of a rate: when it started, what it counted."""
    start_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms, self.value = now_ms, 0.0


@dataclass(slots=True)
class QuotaViolation:
    """What the sensor measured when a record took the rate above its bound."""

    value: float
    bound: float
    window_ms: int


@dataclass(slots=True)
class QuotaSensor:
    """One quota entity's rate with its bound (per second); `record` says whether it is violated."""

    samples: int
    window_ms: int
    bound: float
    last_record_ms: int = 0
    _samples: list[Sample] = field(default_factory=list)
    _current: int = 0

    def record(self, value: float, now_ms: int, *, check: bool = True) -> QuotaViolation | None:
        """Add `value` at `now_ms`; the violation when the rate is then above the bound."""
        self.last_record_ms = now_ms
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:  # the window is over: the next one
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                sample = Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        if not check:
            return None
        rate = self.measure(now_ms)
        if rate <= self.bound:
            return None
        return QuotaViolation(rate, self.bound, self.window_size(now_ms))

    def measure(self, now_ms: int) -> float:
        """The rate per second over the retained samples."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size(now_ms) / 1000)

    def window_size(self, now_ms: int) -> int:
        """The span the rate divides by: never less than samples-1 whole windows, so a client's
        first burst is not measured over a few milliseconds (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> Sample:
        if not self._samples:
            self._samples.append(Sample(now_ms))
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age:
                sample.reset(now_ms)


def throttle_time_ms(violation: QuotaViolation) -> int:
    """How long to hold the client so its rate falls back to the bound if it sends nothing more:
    O * W / (W + X) = T gives X = (O - T) / T * W (Kafka's QuotaUtils.throttleTime), rounded
    to a long as Java does (a zero bound's infinity is Long.MAX_VALUE)."""
    difference = violation.value - violation.bound
    if violation.bound == 0:
        x = math.nan if difference == 0 else math.copysign(math.inf, difference)
    else:
        x = difference / violation.bound * violation.window_ms
    if math.isnan(x):
        whole = 0
    elif x >= 2**63:
        whole = 2**63 - 1
    elif x <= -(2**63):
        whole = -(2**63)
    else:
        whole = math.floor(x + 0.5)  # Java's Math.round: halves go up
    return whole


def as_int(whole: int) -> int:
    """Java's (int) of a long, as Kafka narrows a throttle time: a huge one wraps (Long.MAX_VALUE
    to -1), and a throttle that is not positive is none."""
    return max((whole + 2**31) % 2**32 - 2**31, 0)
