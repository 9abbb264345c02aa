"""AddOffsetsToTxn (key 25), v0-4: a transactional producer is about to commit a group's offsets in
its transaction (send_offsets_to_transaction); the coordinator adds that group's
`__consumer_offsets` partition to the transaction, so its marker reaches the group coordinator.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.handlers.txn_errors import for_version
from protocol.errors import ErrorCode


@register(25)
async def handle(ctx: RequestContext, request) -> dict:
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    error = await ctx.services.transaction_coordinator.handle_add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
    return {"throttle_time_ms": 0, "error_code": for_version(25, ctx.api_version, error)}
