"""ApiVersions (key 18), v0-4: the broker's supported version ranges, built from the registry,
and (v3+) its supported and finalized features (`feature.levels`; group.version 0 advertises
ConsumerGroupHeartbeat as a ZooKeeper-mode Kafka 3.9 does, share.version 0 no share group API,
transaction.version below 2 Produce, EndTxn and TxnOffsetCommit at 3.9's ranges).

- v3+ carries client_software_name/version; names outside Kafka's pattern get INVALID_REQUEST
  (librdkafka then retries with v0), as the Java broker does.
- A request above v4 never reaches this module: the connection answers it with the v0-layout
  UNSUPPORTED_VERSION reply (see `api_versions_fallback`), since its body cannot be read.
"""

from __future__ import annotations

import functools
import re

from broker.config import SUPPORTED_FEATURES
from broker.handlers import HANDLERS, RequestContext, register
from protocol.errors import ErrorCode

API_KEY = 18
MIN_VERSION, MAX_VERSION = HANDLERS[API_KEY].min_version, HANDLERS[API_KEY].max_version
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


# APIs a feature turns on: below this level of it, the API is advertised at the range a
# ZooKeeper-mode Kafka 3.9 gives it, or not at all (None), and answers UNSUPPORTED_VERSION.
GATED: dict[int, tuple[str, int, tuple[int, int] | None]] = {
    68: ("group.version", 1, (0, 0)),
    # transactions v2: Produce v12, EndTxn v5 and TxnOffsetCommit v5 (KIP-890 part 2)
    0: ("transaction.version", 2, (0, 11)),
    26: ("transaction.version", 2, (0, 4)),
    28: ("transaction.version", 2, (0, 4)),
    **{key: ("share.version", 1, None)
       for key in (76, 77, 78, 79, 83, 84, 85, 86, 90, 91, 92)}}


@functools.cache  # built once per feature levels, not for every client's first request
def supported_ranges(levels: tuple[tuple[str, int], ...] = ()) -> list[dict]:
    enabled = dict(levels)
    ranges = []
    for h in sorted(HANDLERS.values(), key=lambda h: h.api_key):
        low, high = h.min_version, h.max_version
        gate = GATED.get(h.api_key)
        if gate is not None and enabled.get(gate[0], 0) < gate[1]:
            if gate[2] is None:
                continue
            low, high = gate[2]
        ranges.append({"api_key": h.api_key, "min_version": low, "max_version": high})
    return ranges


def features(levels: dict[str, int]) -> dict:
    """ApiVersions v3+'s features: those this broker supports, and the finalized levels (a
    feature at level 0 is not listed, as Kafka leaves it out)."""
    return {
        "supported_features": [{"name": n, "min_version": low, "max_version": high}
                               for n, (low, high) in sorted(SUPPORTED_FEATURES.items())],
        "finalized_features_epoch": 0,
        "finalized_features": [{"name": n, "max_version_level": level, "min_version_level": level}
                               for n, level in sorted(levels.items()) if level > 0]}


def api_versions_fallback() -> dict:
    """The v0-layout body for an ApiVersions request at a version this broker does not speak."""
    return {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": API_KEY, "min_version": MIN_VERSION, "max_version": MAX_VERSION}],
    }


@register(API_KEY)
async def handle(ctx: RequestContext, request) -> dict:
    levels = ctx.services.config["feature.levels"]
    ranges = supported_ranges(tuple(sorted(levels.items())))
    if ctx.api_version >= 3 and not (
        _SOFTWARE_PATTERN.fullmatch(request.client_software_name or "")
        and _SOFTWARE_PATTERN.fullmatch(request.client_software_version or "")
    ):
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": ranges}
    return {"error_code": ErrorCode.NONE, "api_keys": ranges, "throttle_time_ms": 0,
            **features(levels)}
