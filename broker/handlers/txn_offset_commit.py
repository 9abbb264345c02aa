"""TxnOffsetCommit (key 28), v0-5: offsets a transactional producer commits for a group
(send_offsets_to_transaction), sent to the group's coordinator after AddOffsetsToTxn.

- Written to `__consumer_offsets` as the producer's transactional records (acks=-1) and held as
  pending: OffsetFetch shows them only after the commit marker; an abort drops them.
- v3+ (KIP-447) carry the consumer's generation and member id, checked as OffsetCommit checks
  them. Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION.
- v5 (transactions v2, KIP-890 part 2): no AddOffsetsToTxn comes first; the group coordinator
  has the transaction coordinator add the group's offsets partition before it writes.
"""

from __future__ import annotations

from broker.coordinator.group.group_metadata import OffsetAndMetadata
from broker.coordinator.transaction.verification import add_offsets_partition
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, filter_authorized
from protocol.errors import ErrorCode

FIRST_TRANSACTIONS_V2_VERSION = 5


@register(28)
async def handle(ctx: RequestContext, request) -> dict:
    coordinator = ctx.services.group_coordinator
    cache = ctx.services.metadata_cache
    now = coordinator.time_ms()
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        refused = None
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, request.topics,
                                 lambda t: t.name) if refused is None else set()
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if refused is not None:
                errors[tp] = refused
            elif topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif cache.partition_state(*tp) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in errors:
                continue
            offsets[tp] = OffsetAndMetadata(p.committed_offset, p.get("committed_leader_epoch", -1),
                                            p.committed_metadata or "", now)
    if offsets and ctx.api_version >= FIRST_TRANSACTIONS_V2_VERSION:
        services = ctx.services
        error = await add_offsets_partition(
            services.metadata_cache, services.txn_transport, request.transactional_id,
            request.producer_id, request.producer_epoch,
            services.transaction_coordinator.offsets_partition_for(request.group_id))
        if error != ErrorCode.NONE:
            errors.update(dict.fromkeys(offsets, error))
            offsets = {}
    if offsets:
        errors.update(await coordinator.handle_txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            request.get("member_id", ""), request.get("group_instance_id"),
            request.get("generation_id", -1), offsets))
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": errors[(topic.name, p.partition_index)]}
            for p in topic.partitions]}
        for topic in request.topics]}
