"""DescribeTransactions (key 65), v0: state, producer id and epoch, timeout, start time and
partitions of transactional ids this broker coordinates (NOT_COORDINATOR for the others,
TRANSACTIONAL_ID_NOT_FOUND for ids it does not know)."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode
from protocol.transaction_records import partitions_by_topic


def _describe(ctx: RequestContext, transactional_id: str) -> dict:
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error, txn = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    else:
        error, txn = ctx.services.transaction_coordinator.describe(transactional_id)
    if txn is None:
        return {"error_code": error, "transactional_id": transactional_id, "transaction_state": "",
                "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                "producer_epoch": -1, "topics": []}
    return {"error_code": ErrorCode.NONE, "transactional_id": transactional_id,
            "transaction_state": txn.state.kafka_name,
            "transaction_timeout_ms": txn.txn_timeout_ms,
            "transaction_start_time_ms": txn.txn_start_timestamp,
            "producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch,
            "topics": [{"topic": t, "partitions": ps}
                       for t, ps in partitions_by_topic(txn.partitions).items()
                       # the topics the caller may not describe are left out
                       if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t)]}


@register(65)
async def handle(ctx: RequestContext, request) -> dict:
    return {"throttle_time_ms": 0, "transaction_states": [
        _describe(ctx, tid) for tid in request.transactional_ids]}
