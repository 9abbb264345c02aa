"""Fetch (key 1), v4-12: read whole batches, park in the fetch purgatory when too little is there.

- A partition listed more than once is read and answered once, with the last listing's offset
  and sizes (Kafka builds a LinkedHashMap of the request's partitions).
- Sessionless only (KIP-227): session_id 0 is answered with session_id 0 and every requested
  partition; a non-zero session id gets FETCH_SESSION_ID_NOT_FOUND so the client starts over.
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
from broker.replication.delayed_fetch import (
    FetchParams,
    FetchPartition,
    FetchPartitionData,
    distinct_partitions,
)
from protocol.errors import ErrorCode
from protocol.records import ZSTD, iter_batches

ZSTD_MIN_FETCH_VERSION = 10


def _has_zstd(records: bytes) -> bool:
    return any(h.compression == ZSTD for _, h in iter_batches(records))


@register(1, "Fetch", 4, 12)
async def handle(ctx: RequestContext, request) -> dict:
    version = ctx.api_version
    if version >= 7 and request.session_id != 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                "session_id": 0, "responses": []}
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
    refused: list[FetchPartition] = []
    if ctx.services.authorizer is not None:
        # A follower needs CLUSTER_ACTION; a consumer READ on each topic it fetches.
        if params.is_from_follower:
            readable = set() if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION) else {
                fp.topic for fp in partitions}
        else:
            readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, partitions,
                                         lambda fp: fp.topic)
        refused = [fp for fp in partitions if fp.topic not in readable]
        partitions = [fp for fp in partitions if fp.topic in readable]
    results = await ctx.services.replica_manager.fetch_messages(params, partitions)
    partitions += refused
    results += [FetchPartitionData(ErrorCode.TOPIC_AUTHORIZATION_FAILED) for _ in refused]
    by_topic: dict[str, list[dict]] = {}
    for fp, data in zip(partitions, results, strict=True):
        error, records = data.error, data.records
        if records and version < ZSTD_MIN_FETCH_VERSION and _has_zstd(records):
            error, records = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b""
        by_topic.setdefault(fp.topic, []).append({
            "partition_index": fp.partition,
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
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
    }
