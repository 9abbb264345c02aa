"""InitProducerId (key 22), v0-5: a producer id and epoch for an idempotent producer.

- No producer id in the request (v0-2, or -1/-1): a fresh id from the broker's block of 1000
  (broker/producer_id_manager.py), epoch 0.
- v3+ with the producer's current id and epoch (KIP-360, after UNKNOWN_PRODUCER_ID or
  OUT_OF_ORDER_SEQUENCE_NUMBER) and no transactional id: a fresh id at epoch 0, as Kafka's
  TransactionCoordinator answers. Nothing proves the caller owns the id it names, so bumping its
  epoch would let any client that learnt an id fence that producer.
- Only one of producer_id / producer_epoch set: INVALID_REQUEST, as Kafka.
- With a transactional id the transaction coordinator answers (its broker must lead the id's
  `__transaction_state` partition, else NOT_COORDINATOR): a new id gets a fresh producer id at
  epoch 0, a known one its epoch bumped (an open transaction is fenced and aborted first, and the
  client told CONCURRENT_TRANSACTIONS to retry); transaction_timeout_ms above
  `transaction.max.timeout.ms` gets INVALID_TRANSACTION_TIMEOUT.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
)
from broker.handlers.txn_errors import for_version
from broker.metadata.store import ConnectionLossError, MetadataStoreError
from protocol.errors import ErrorCode, KafkaError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _answer(error: ErrorCode, producer_id: int = NO_PRODUCER_ID,
            producer_epoch: int = NO_PRODUCER_EPOCH) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id,
            "producer_epoch": producer_epoch}


@register(22)
async def handle(ctx: RequestContext, request) -> dict:
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _answer(ErrorCode.INVALID_REQUEST)
    if request.transactional_id is not None:
        if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
            return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, epoch)
        error, pid, epoch = await ctx.services.transaction_coordinator.handle_init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, expected)
        return _answer(for_version(22, ctx.api_version, error), pid, epoch)
    # An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
    if not (authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE)
            or authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    ids = ctx.services.producer_ids
    try:
        producer_id = await ids.generate_producer_id()
        # a new block claimed in the store must be durable before any of its ids is handed out
        await ids.store.flush()
    except KafkaError as exc:
        return _answer(exc.code)
    except ConnectionLossError:
        return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    except MetadataStoreError:
        return _answer(ErrorCode.KAFKA_STORAGE_ERROR)
    return _answer(ErrorCode.NONE, producer_id, 0)
