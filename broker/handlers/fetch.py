"""Fetch (key 1), v4-12: read whole batches, park in the fetch purgatory when too little is there.

- A partition listed more than once is read and answered once, with the last listing's offset
  and sizes (Kafka builds a LinkedHashMap of the request's partitions).
- Fetch sessions (KIP-227, v7+; broker/replication/fetch_session.py): epoch 0 is a full fetch that
  opens a session when the cache has a slot, the session's id and epoch an incremental one that
  answers only partitions with something new; an unknown id gets FETCH_SESSION_ID_NOT_FOUND, a
  wrong epoch INVALID_FETCH_SESSION_EPOCH (no partitions, session_id 0); epoch -1 closes the
  session named and answers sessionless. Below v7 every fetch is sessionless.
- Consumers read below the high watermark, read_committed ones (isolation_level 1) below the last
  stable offset with the aborted transactions of what they read (producer id, first offset: the
  client drops those records); followers (replica_id >= 0) read below the log end offset.
- aborted_transactions is null for read_uncommitted, as Kafka answers; preferred_read_replica = -1.
- A zstd batch to a fetch below v10 gets UNSUPPORTED_COMPRESSION_TYPE for that partition.
- With an authorizer: a consumer needs READ on each topic, a follower CLUSTER_ACTION; the rest
  are answered TOPIC_AUTHORIZATION_FAILED and read nothing.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_authorized,
)
from broker.handlers.services import BrokerServices
from broker.replication.delayed_fetch import FetchParams, FetchPartition, distinct_partitions
from broker.replication.fetch_session import FetchMetadata
from protocol.errors import ErrorCode
from protocol.records import ZSTD, iter_batches

API_KEY = 1
ZSTD_MIN_FETCH_VERSION = 10


def _has_zstd(records: bytes) -> bool:
    return any(h.compression == ZSTD for _, h in iter_batches(records))


def session_partitions(services: BrokerServices, request) -> list[tuple[str, int]]:
    """The partitions of the fetch session an incremental Fetch names (it reads them all without
    listing them); none for a full or sessionless one. Injected partition faults match these too."""
    session_id, epoch = request.get("session_id", 0), request.get("session_epoch", -1)
    if session_id == 0 or epoch <= 0:
        return []
    session = services.replica_manager.fetch_manager.cache.get(session_id)
    return list(session.partitions) if session is not None else []


@register(API_KEY, "Fetch", 4, 12)
async def handle(ctx: RequestContext, request) -> dict:
    version = ctx.api_version
    fetch_max = ctx.services.config["fetch.max.bytes"]
    params = FetchParams(
        replica_id=request.replica_id,
        max_wait_ms=max(0, request.max_wait_ms),
        min_bytes=max(0, request.min_bytes),
        max_bytes=min(fetch_max, request.max_bytes if request.max_bytes > 0 else fetch_max),
        isolation_level=request.isolation_level,
    )
    # Each partition once, the last listing of a duplicate winning (Kafka's LinkedHashMap): what
    # one Fetch costs is bounded by its distinct partitions, not by how often it lists them.
    partitions = distinct_partitions([
        FetchPartition(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                       p.current_leader_epoch if version >= 9 else -1,
                       p.get("log_start_offset", -1))
        for t in request.topics
        for p in t.partitions
    ])
    if version >= 7:
        metadata = FetchMetadata(request.session_id, request.session_epoch)
        forgotten = [(t.topic, p) for t in request.forgotten_topics_data for p in t.partitions]
    else:
        metadata, forgotten = FetchMetadata(), []
    readable = None
    if ctx.services.authorizer is not None:
        # Checked per fetch over every partition it reads (a session's unnamed ones included), as
        # Kafka: a follower needs CLUSTER_ACTION, a consumer READ on each topic.
        def readable(session_partitions: list[FetchPartition]) -> set[str]:
            if params.is_from_follower:
                allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
                return {fp.topic for fp in session_partitions} if allowed else set()
            return filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                                     session_partitions, lambda fp: fp.topic)
    answer = await ctx.services.replica_manager.fetch_in_session(
        params, metadata, partitions, forgotten, readable=readable)
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), data in answer.partitions.items():
        error, records = data.error, data.records
        if records and version < ZSTD_MIN_FETCH_VERSION and _has_zstd(records):
            error, records = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b""
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "error_code": error,
            "high_watermark": data.high_watermark,
            "last_stable_offset": data.last_stable_offset,
            "log_start_offset": data.log_start_offset,
            "aborted_transactions": None if data.aborted_transactions is None else [
                {"producer_id": t.producer_id, "first_offset": t.first_offset}
                for t in data.aborted_transactions],
            "preferred_read_replica": -1,
            "records": records,
        })
    return {
        "throttle_time_ms": 0,
        "error_code": answer.error,
        "session_id": answer.session_id,
        "responses": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
    }
