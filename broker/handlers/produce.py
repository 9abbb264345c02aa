"""Produce (key 0), v0-12: append record batches, answer per partition.

- v3 is the first version carrying magic-2 batches only; Kafka 4 serves 3+ only. v0-2 carry
  message sets of message format v0/v1 (magic 0/1), converted to one magic-2 batch per partition
  first, as Kafka 3.9 converts them on append (protocol/legacy_records.py; a large request's in a
  worker thread): a magic-0 record has no timestamp (-1), unless its topic stamps LogAppendTime.
  A message whose CRC does not match, or a set that cannot be read: CORRUPT_MESSAGE for that
  partition.
- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every partition); acks=0 gets no
  response at all. acks=-1 parks as a DelayedProduce until the high watermark covers the
  append (every ISR member has it); NOT_ENOUGH_REPLICAS when the ISR is below
  min.insync.replicas before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND when it falls below
  while waiting, REQUEST_TIMED_OUT at timeout_ms.
- Each partition fails alone: UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (an internal
  topic such as __consumer_offsets), CORRUPT_MESSAGE (CRC, malformed batch length),
  MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE (also a compressed batch that would inflate past the
  decompression bound), INVALID_RECORD (no complete batch, a batch of magic 0/1, or more than one
  batch for a partition: Kafka's ProduceRequest.validateRecords; a client batch whose base offset
  is not 0; a record that cannot be read out of its CRC-valid batch, or a batch declaring more or
  fewer records than it holds: Kafka's InvalidRecordException).
- A zstd batch in a Produce below v7 (KIP-110): UNSUPPORTED_COMPRESSION_TYPE for its partition.
- Records refused one by one (KIP-467, v8+): INVALID_RECORD or INVALID_TIMESTAMP with
  `record_errors` (each record's index in its batch and Kafka's message) and Kafka's summary as
  `error_message`. Other errors carry a message too, where Kafka sends none (the disk-fault
  answers say which errno).
- Idempotent batches (storage/producer_state.py): a retried batch is answered NONE with its
  original base offset and not written again; OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
  UNKNOWN_PRODUCER_ID otherwise. v3-4 predate UNKNOWN_PRODUCER_ID (Kafka 1.0, with v5's
  log_start_offset): those clients get OUT_OF_ORDER_SEQUENCE_NUMBER instead.
- Quotas (after the append): the request's size on the client's producer_byte_rate, its time on
  request_percentage (not for acks=0); a violation answers throttle_time_ms and mutes the
  connection that long (KIP-219).
- First: transactional batches come with a transactional id and, with an authorizer, WRITE on
  it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere); each topic needs WRITE (else
  TOPIC_AUTHORIZATION_FAILED); idempotent ones need nothing more (KIP-679).
- Transaction verification (KIP-890, `transaction.partition.verification.enable`): a transactional
  batch to a partition where its producer has no transaction open yet is written only once the
  coordinator confirms the partition is in that producer's ongoing transaction; INVALID_TXN_STATE
  (or INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING) if not, NOT_ENOUGH_REPLICAS
  (retriable) when the coordinator cannot say now.
- Transactions v2 (KIP-890 part 2, v12): the leader asks the coordinator to add the partition to
  the producer's transaction (AddPartitionsToTxn from the broker, not verify-only), with the same
  answers; a producer sends no AddPartitionsToTxn of its own.
"""

from __future__ import annotations

import asyncio

from broker.coordinator.transaction.verification import (
    transactional_producers,
    verify_transactional_writes,
)
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, filter_authorized
from broker.replication.delayed_produce import ProduceResult
from protocol.compression import decompression_limit
from protocol.errors import ErrorCode, KafkaError
from protocol.legacy_records import to_record_batch
from protocol.records import MAGIC_V2, ZSTD, BatchHeader, iter_batches

FIRST_MAGIC_V2_VERSION = 3
CONVERT_ON_LOOP_BYTES = 256 * 1024  # larger v0-2 message sets are converted in a worker thread
FIRST_VERSION_WITH_UNKNOWN_PRODUCER_ID = 5
FIRST_TRANSACTIONS_V2_VERSION = 12
FIRST_VERSION_WITH_ZSTD = 7  # KIP-110: older clients cannot have asked for it


def _response(request, results: dict) -> dict:
    return {
        "responses": [
            {
                "name": topic.name,
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": (r := results[(topic.name, p.index)]).error,
                        "base_offset": r.base_offset,
                        "log_append_time_ms": r.log_append_time_ms,
                        "log_start_offset": r.log_start_offset,
                        "error_message": r.error_message,
                        "record_errors": [{"batch_index": index, "batch_index_error_message": message}
                                          for index, message in r.record_errors],
                    }
                    for p in topic.partition_data
                ],
            }
            for topic in request.topic_data
        ],
        "throttle_time_ms": 0,
    }


def _validate_records(records, version: int) -> ProduceResult | None:
    """Kafka's ProduceRequest.validateRecords: exactly one magic-2 batch per partition, not zstd
    below v7; CORRUPT_MESSAGE for a first batch length no batch can have."""
    batches: list[BatchHeader] = []
    try:
        for _, header in iter_batches(records or b""):
            batches.append(header)
            if len(batches) == 2:
                break
    except KafkaError as exc:  # a length no batch can have
        if not batches:
            return ProduceResult(exc.code, error_message=exc.message)
    if not batches:
        message = "must have at least one record batch per partition"
    elif batches[0].magic != MAGIC_V2:
        message = "are only allowed to contain record batches with magic version 2"
    elif version < FIRST_VERSION_WITH_ZSTD and batches[0].compression == ZSTD:
        return ProduceResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, error_message=(
            f"Produce requests with version {version} are not allowed to use ZStandard "
            "compression"))
    elif len(batches) > 1:
        message = "are only allowed to contain exactly one record batch per partition"
    else:
        return None
    return ProduceResult(ErrorCode.INVALID_RECORD,
                         error_message=f"Produce requests with version {version} {message}")


def _refuse_unauthorized(ctx: RequestContext, request, entries: dict,
                         transactional: bool) -> dict:
    """The results for what the principal may not write (Kafka's checks before anything else):
    a transactional batch without WRITE on its transactional id fails the whole request."""
    if transactional and not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                       request.get("transactional_id")):
        return {key: ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for key in entries}
    writable = filter_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, entries, lambda k: k[0])
    return {key: ProduceResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for key in entries if key[0] not in writable}


def _is_internal(ctx: RequestContext, topic: str) -> bool:
    info = ctx.services.metadata_cache.topic(topic)
    return info is not None and info.internal


def _converted(entries: dict, limit: int) -> tuple[dict, dict]:
    """Produce v0-2's message sets as magic-2 batches, and the results of those refused."""
    converted, refused = {}, {}
    for key, records in entries.items():
        try:
            converted[key] = to_record_batch(records or b"", limit)
        except KafkaError as exc:
            refused[key] = ProduceResult(exc.code, error_message=exc.message)
    return converted, refused


@register(0)
async def handle(ctx: RequestContext, request) -> dict | None:
    entries = {(t.name, p.index): p.records for t in request.topic_data for p in t.partition_data}
    results: dict = {}
    if ctx.api_version < FIRST_MAGIC_V2_VERSION:
        limit = decompression_limit(ctx.services.config["message.max.bytes"])
        if sum(len(r or b"") for r in entries.values()) > CONVERT_ON_LOOP_BYTES:
            entries, results = await asyncio.to_thread(_converted, entries, limit)
        else:
            entries, results = _converted(entries, limit)
    producers = transactional_producers(entries)
    if producers and request.get("transactional_id") is None:
        # Kafka's first check: transactional records come with their transactional id
        results |= {key: ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    for key in entries}
        return None if request.acks == 0 else _response(request, results)
    if ctx.services.authorizer is not None:
        results |= _refuse_unauthorized(ctx, request, entries, bool(producers))
        entries = {key: records for key, records in entries.items() if key not in results}
    if request.acks not in (-1, 0, 1):
        results |= {key: ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS) for key in entries}
    else:
        for key, records in list(entries.items()):
            refused = _validate_records(records, ctx.api_version)
            if refused is not None:
                del entries[key]
                results[key] = refused
        for key in [k for k in entries if _is_internal(ctx, k[0])]:
            del entries[key]  # only the broker itself writes to internal topics
            results[key] = ProduceResult(ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=(
                f"Cannot append to internal topic {key[0]}"))
        producers = {key: p for key, p in producers.items() if key in entries}
        verified = None
        # Transactions v2 (Produce v12) add the partitions to the transaction here, whatever
        # transaction.partition.verification.enable says; before, that setting asks the
        # coordinator whether the producer added them.
        adds = ctx.api_version >= FIRST_TRANSACTIONS_V2_VERSION
        if producers and (adds or ctx.services.config["transaction.partition.verification.enable"]):
            services = ctx.services
            refused, verified = await verify_transactional_writes(
                services.replica_manager, services.metadata_cache, services.txn_transport,
                request.get("transactional_id"), producers, add=adds)
            for key, code in refused.items():
                del entries[key]
                results[key] = ProduceResult(code, error_message=(
                    "the transaction coordinator did not add the partition to this producer's "
                    "transaction" if adds else "the partition is not in this producer's ongoing "
                    "transaction (transaction.partition.verification.enable)"))
        if entries:
            results |= await ctx.services.replica_manager.produce(
                request.acks, request.timeout_ms, entries, verified=verified)
    if ctx.api_version < FIRST_VERSION_WITH_UNKNOWN_PRODUCER_ID:
        for result in results.values():
            if result.error == ErrorCode.UNKNOWN_PRODUCER_ID:
                result.error = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    _record_quotas(ctx, request.acks)
    if request.acks == 0:
        return None
    return _response(request, results)


def _record_quotas(ctx: RequestContext, acks: int) -> None:
    """After the append, as Kafka's produce callback: the request's bytes on the produce quota,
    the time so far on the request quota (not for acks=0); the longer throttle mutes."""
    quotas = ctx.services.quotas
    if quotas is None:
        return
    ctx.request_quota_recorded = True
    if not quotas.enabled("produce", "request"):
        return
    user, client_id = ctx.quota_user, ctx.client_id
    ctx.throttle("produce", quotas.produce.record(user, client_id, ctx.request_size))
    if acks != 0 and ctx.handler_time_ns is not None:
        ctx.throttle("request", quotas.request.record_nanos(user, client_id,
                                                            ctx.handler_time_ns()))
