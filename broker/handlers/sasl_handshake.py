"""SaslHandshake (key 17), v0-1, as Kafka's KafkaApis sees it: only after authentication (or on a
listener without SASL), where it is out of place — ILLEGAL_SASL_STATE. Before authentication the
connection's SASL authenticator (broker/network/sasl_server_authenticator.py) answers it."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from protocol.errors import ErrorCode


@register(17)
async def handle(ctx: RequestContext, request) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
