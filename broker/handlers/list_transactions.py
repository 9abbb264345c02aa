"""ListTransactions (key 66), v0-1: the transactional ids this broker coordinates, filtered by state
(Kafka's names: Ongoing, PrepareCommit...; unknown names are listed back), producer id and (v1)
how long the transaction has been open."""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize


@register(66)
async def handle(ctx: RequestContext, request) -> dict:
    error, found, unknown = ctx.services.transaction_coordinator.list_transactions(
        set(request.state_filters), set(request.producer_id_filters),
        request.get("duration_filter", -1))
    return {"throttle_time_ms": 0, "error_code": error, "unknown_state_filters": unknown,
            "transaction_states": [
                {"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                 "transaction_state": t.state.kafka_name} for t in found
                if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                             t.transactional_id)]}
