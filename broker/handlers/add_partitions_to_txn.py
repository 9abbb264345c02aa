"""AddPartitionsToTxn (key 24), v0-5: a transactional producer names the partitions it is about to
write to, before its first batch to each.

- v0-3 (clients): one transaction. A partition the metadata cache does not know gets
  UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka; otherwise the
  coordinator's one answer (CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, NOT_COORDINATOR...) is
  repeated for every partition.
- v4+ (brokers, KIP-890): several transactions; `verify_only` asks whether the partitions are
  already in the open transaction (INVALID_TXN_STATE for those that are not). Without it, a
  leader serving a transactions v2 Produce (or a TxnOffsetCommit v5) adds them: the transaction
  becomes a v2 one, whose EndTxn bumps the epoch.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
    filter_authorized,
)
from broker.handlers.txn_errors import for_version
from protocol.errors import ErrorCode


async def _one(ctx: RequestContext, transactional_id: str, producer_id: int, epoch: int,
               topics, verify_only: bool) -> list[dict]:
    cache = ctx.services.metadata_cache
    keys = [(t.name, p) for t in topics for p in t.partitions]
    writable = filter_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, keys, lambda tp: tp[0])
    failed = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in keys if tp[0] not in writable}
    failed |= {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in keys
               if tp not in failed and cache.partition_state(*tp) is None}
    coordinator = ctx.services.transaction_coordinator
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        errors = dict.fromkeys(keys, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif failed:
        errors = {tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in keys}
    elif verify_only:
        errors = coordinator.verify_partitions(transactional_id, producer_id, epoch, set(keys))
    else:
        error = await coordinator.handle_add_partitions(
            transactional_id, producer_id, epoch, set(keys),
            client_transaction_version=2 if ctx.api_version >= 4 else 0)
        errors = dict.fromkeys(keys, error)
    by_topic: dict[str, list[dict]] = {}
    for topic, partition in keys:
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "partition_error_code": for_version(
                24, ctx.api_version, errors[(topic, partition)])})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


@register(24)
async def handle(ctx: RequestContext, request) -> dict:
    if ctx.api_version <= 3:
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": await _one(
            ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)}
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):  # v4+ is the brokers' batch
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    results = []
    for txn in request.transactions:
        results.append({"transactional_id": txn.transactional_id, "topic_results": await _one(
            ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
            txn.verify_only)})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results}
