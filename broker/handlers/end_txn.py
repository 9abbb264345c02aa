"""EndTxn (key 26), v0-5: commit or abort the producer's transaction. Answered once
PrepareCommit/PrepareAbort is in `__transaction_state`; the markers follow. A retry of an EndTxn
that already completed the same way answers NONE; the other outcome, INVALID_TXN_STATE.

- v5 (transactions v2, KIP-890 part 2): the EndTxn bumps the producer epoch, its markers carry the
  bumped epoch (fencing the transaction's late writes), and the answer gives the producer id and
  epoch to go on with: the next one, or a new producer id at epoch 0 when the epochs ran out.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.handlers.txn_errors import for_version
from protocol.errors import ErrorCode

FIRST_TRANSACTIONS_V2_VERSION = 5


@register(26)
async def handle(ctx: RequestContext, request) -> dict:
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    version = 2 if ctx.api_version >= FIRST_TRANSACTIONS_V2_VERSION else 0
    error, producer_id, producer_epoch = \
        await ctx.services.transaction_coordinator.handle_end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.committed, version)
    return {"throttle_time_ms": 0, "error_code": for_version(26, ctx.api_version, error),
            "producer_id": producer_id, "producer_epoch": producer_epoch}
