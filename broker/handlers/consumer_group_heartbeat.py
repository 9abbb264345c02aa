"""ConsumerGroupHeartbeat (key 68), v0: the KIP-848 consumer group protocol. A ZooKeeper-mode Kafka
3.9 broker advertises it but its (classic) group coordinator cannot serve it: UNSUPPORTED_VERSION,
with no message, before any authorization, as Kafka's KafkaApis answers; so here."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from protocol.errors import ErrorCode


@register(68)
async def handle(ctx: RequestContext, request) -> dict:
    return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION,
            "error_message": None, "member_id": None, "member_epoch": 0,
            "heartbeat_interval_ms": 0, "assignment": None}
