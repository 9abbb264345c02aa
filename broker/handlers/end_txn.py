"""EndTxn (key 26), v0-4: commit or abort the producer's transaction. Answered once
PrepareCommit/PrepareAbort is in `__transaction_state`; the markers follow. A retry of an EndTxn
that already completed the same way answers NONE; the other outcome, INVALID_TXN_STATE.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.handlers.txn_errors import for_version
from protocol.errors import ErrorCode


@register(26)
async def handle(ctx: RequestContext, request) -> dict:
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    error = await ctx.services.transaction_coordinator.handle_end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed)
    return {"throttle_time_ms": 0, "error_code": for_version(26, ctx.api_version, error)}
