"""RenewDelegationToken (key 39), v0-2: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on PLAINTEXT and 1-way
SSL, else DELEGATION_TOKEN_AUTH_DISABLED (no token secret), expiry -1, as Kafka 3.9 (ZK mode)."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.delegation_tokens import first_error


@register(39)
async def handle(ctx: RequestContext, request) -> dict:
    return {"error_code": first_error(ctx), "expiry_timestamp_ms": -1, "throttle_time_ms": 0}
