"""ApiVersions (key 18), v0-4: the broker's supported version ranges, built from the registry.

- v3+ carries client_software_name/version; names outside Kafka's pattern get INVALID_REQUEST
  (librdkafka then retries with v0), as the Java broker does.
- A request above v4 never reaches this module: the connection answers it with the v0-layout
  UNSUPPORTED_VERSION reply (see `api_versions_fallback`), since its body cannot be read.
"""

from __future__ import annotations

import functools
import re

from broker.handlers import HANDLERS, RequestContext, register
from protocol.errors import ErrorCode

API_KEY = 18
MIN_VERSION, MAX_VERSION = HANDLERS[API_KEY].min_version, HANDLERS[API_KEY].max_version
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@functools.cache  # the table is fixed: built once, not for every client's first request
def supported_ranges() -> list[dict]:
    return [
        {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
        for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
    ]


def api_versions_fallback() -> dict:
    """The v0-layout body for an ApiVersions request at a version this broker does not speak."""
    return {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": API_KEY, "min_version": MIN_VERSION, "max_version": MAX_VERSION}],
    }


@register(API_KEY)
async def handle(ctx: RequestContext, request) -> dict:
    if ctx.api_version >= 3 and not (
        _SOFTWARE_PATTERN.fullmatch(request.client_software_name or "")
        and _SOFTWARE_PATTERN.fullmatch(request.client_software_version or "")
    ):
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": supported_ranges()}
    return {"error_code": ErrorCode.NONE, "api_keys": supported_ranges(), "throttle_time_ms": 0}
