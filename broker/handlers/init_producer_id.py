"""InitProducerId (key 22), v0-5: a fresh producer id with epoch 0 for an idempotent producer.

The idempotence issue adds id blocks, epoch bumps and sequence checks. Transactions are not
implemented: a non-null transactional_id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients
treat as fatal and report, rather than a retriable error they would loop on.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from protocol.errors import ErrorCode


@register(22, "InitProducerId", 0, 5)
async def handle(ctx: RequestContext, request) -> dict:
    if request.transactional_id is not None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    producer_id = ctx.broker.producer_ids.generate_producer_id()
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "producer_id": producer_id, "producer_epoch": 0}
