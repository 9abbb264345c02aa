"""SaslAuthenticate (key 36), v0-2, as Kafka's KafkaApis sees it: after authentication (or on a
listener without SASL) it is out of place — ILLEGAL_SASL_STATE. Before authentication the
connection's SASL authenticator answers it."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from protocol.errors import ErrorCode


@register(36)
async def handle(ctx: RequestContext, request) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}
