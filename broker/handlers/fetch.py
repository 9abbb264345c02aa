"""Fetch (key 1), v0-17: read whole batches, park in the fetch purgatory when too little is there.

- v0-3 (consumers of message format v0/v1): the batches read are down-converted to message sets
  of magic 0 (v0-1) or 1 (v2-3), one uncompressed message per record, transaction markers left
  out, as Kafka 3.9 down-converts (protocol/legacy_records.py; a large answer in a worker thread);
  a topic with message.downconversion.enable=false answers UNSUPPORTED_VERSION instead.

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
- v13+ names topics by id (request, response, forgotten topics): an id this broker's metadata
  does not know is answered UNKNOWN_TOPIC_ID per partition; a session's partition whose topic has
  since been recreated under its name (another id) INCONSISTENT_TOPIC_ID; a session opened by
  names cannot go on by ids nor the reverse (FETCH_SESSION_TOPIC_ID_ERROR). v15 moves replica_id
  into replica_state; v16 (KIP-951) answers NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH with the
  current leader and epoch, and node_endpoints with those leaders' addresses on the listener the
  request came in on; v17's replica_directory_id is accepted and ignored (one log dir).
- Quotas (a consumer's): max_bytes capped at consumer_byte_rate * (quota.window.num - 1) windows;
  a response over consumer_byte_rate or request_percentage is sent with no partitions (the
  session untouched) and throttle_time_ms, and the connection is muted that long (KIP-219).
- With an authorizer: a consumer needs READ on each topic, a follower CLUSTER_ACTION; the rest
  are answered TOPIC_AUTHORIZATION_FAILED and read nothing.
"""

from __future__ import annotations

import asyncio
import uuid

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
from protocol.errors import ErrorCode, KafkaError
from protocol.legacy_records import to_message_set
from protocol.records import ZSTD, iter_batches

API_KEY = 1
ZSTD_MIN_FETCH_VERSION = 10
FIRST_MAGIC_V1_VERSION, FIRST_MAGIC_V2_VERSION = 2, 4
CONVERT_ON_LOOP_BYTES = 256 * 1024  # larger answers are down-converted in a worker thread


async def _down_convert(partitions: dict, magic: int, services: BrokerServices) -> None:
    """Fetch v0-3: the records as message sets of the consumer's magic; UNSUPPORTED_VERSION
    for a topic with message.downconversion.enable=false, as Kafka."""
    hosted = services.replica_manager.partitions
    for key, data in partitions.items():
        if data.records and (p := hosted.get(key)) is not None and \
                not p.log.config.message_downconversion_enable:
            data.error, data.records = ErrorCode.UNSUPPORTED_VERSION, b""

    def convert() -> None:
        for data in partitions.values():
            if not data.records:
                continue
            if _has_zstd(data.records):  # (a zstd batch needs v10, conversion or not)
                data.error, data.records = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b""
                continue
            try:
                data.records = to_message_set(data.records, magic)
            except KafkaError as exc:
                data.error, data.records = exc.code, b""

    if sum(len(data.records) for data in partitions.values()) > CONVERT_ON_LOOP_BYTES:
        await asyncio.to_thread(convert)
    else:
        convert()


def _has_zstd(records: bytes) -> bool:
    return any(h.compression == ZSTD for _, h in iter_batches(records))


def session_partitions(services: BrokerServices, request) -> list[tuple[str, int]]:
    """The named partitions a Fetch touches besides those it names by name: an incremental Fetch's
    session partitions (it reads them all without listing them) and, for v13+, the partitions it
    names by topic id. Injected partition faults match these too."""
    cache = services.metadata_cache
    touched = [(name, p.partition) for t in request.topics
               if (topic_id := t.get("topic_id")) is not None
               and (name := cache.topic_name(uuid.UUID(bytes=bytes(topic_id)))) is not None
               for p in t.partitions]
    session_id, epoch = request.get("session_id", 0), request.get("session_epoch", -1)
    if session_id == 0 or epoch <= 0:
        return touched
    session = services.replica_manager.fetch_manager.cache.get(session_id)
    if session is not None:
        touched += [(cp.topic, cp.partition) for cp in session.partitions.values() if cp.topic]
    return touched


def _replica_id(request, version: int) -> int:
    if version >= 15:
        state = request.get("replica_state")
        return -1 if state is None else state.get("replica_id", -1)
    return request.replica_id


LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


@register(API_KEY)
async def handle(ctx: RequestContext, request) -> dict:
    version = ctx.api_version
    services = ctx.services
    fetch_max = services.config["fetch.max.bytes"]
    params = FetchParams(
        replica_id=_replica_id(request, version),
        max_wait_ms=max(0, request.max_wait_ms),
        min_bytes=max(0, request.min_bytes),
        # (v0-2 have no max_bytes, v0-3 no isolation_level)
        max_bytes=min(fetch_max, max_bytes if (max_bytes := request.get("max_bytes", 0)) > 0
                      else fetch_max),
        isolation_level=request.get("isolation_level", 0),
        # Below v10 the records are looked at for zstd batches the client cannot read
        zero_copy=ctx.zero_copy and version >= ZSTD_MIN_FETCH_VERSION,
    )
    ctx.metric_name = "FetchFollower" if params.is_from_follower else "FetchConsumer"
    uses_topic_ids = version >= 13
    cache = services.metadata_cache
    names: dict[uuid.UUID, str] = {}  # the ids of this request, resolved once each

    def named(topic_id_bytes) -> tuple[str, uuid.UUID]:
        topic_id = uuid.UUID(bytes=bytes(topic_id_bytes))
        if topic_id not in names:
            names[topic_id] = cache.topic_name(topic_id) or ""  # "": UNKNOWN_TOPIC_ID
        return names[topic_id], topic_id

    fetched = []
    for t in request.topics:
        topic, topic_id = named(t.topic_id) if uses_topic_ids else (t.topic, None)
        fetched += [FetchPartition(topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                                   p.current_leader_epoch if version >= 9 else -1,
                                   p.get("log_start_offset", -1), topic_id)
                    for p in t.partitions]
    # Each partition once, the last listing of a duplicate winning (Kafka's LinkedHashMap): what
    # one Fetch costs is bounded by its distinct partitions, not by how often it lists them.
    partitions = distinct_partitions(fetched)
    if version >= 7:
        metadata = FetchMetadata(request.session_id, request.session_epoch)
        forgotten = [((uuid.UUID(bytes=bytes(t.topic_id)) if uses_topic_ids else t.topic), p)
                     for t in request.forgotten_topics_data for p in t.partitions]
    else:
        metadata, forgotten = FetchMetadata(), []
    readable = None
    if services.authorizer is not None:
        # Checked per fetch over every partition it reads (a session's unnamed ones included), as
        # Kafka: a follower needs CLUSTER_ACTION, a consumer READ on each topic.
        def readable(session_partitions: list[FetchPartition]) -> set[str]:
            if params.is_from_follower:
                allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
                return {fp.topic for fp in session_partitions} if allowed else set()
            return filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                                     session_partitions, lambda fp: fp.topic)
    throttle = _quota_throttle(ctx, params)
    answer = await services.replica_manager.fetch_in_session(
        params, metadata, partitions, forgotten, readable=readable, uses_topic_ids=uses_topic_ids,
        throttle=throttle)
    if version < FIRST_MAGIC_V2_VERSION:
        await _down_convert(answer.partitions, 0 if version < FIRST_MAGIC_V1_VERSION else 1,
                            services)
    by_topic: dict[str | uuid.UUID, list[dict]] = {}
    leaders: set[int] = set()
    for (topic, partition), data in answer.partitions.items():
        error, records = data.error, data.records
        if records and FIRST_MAGIC_V2_VERSION <= version < ZSTD_MIN_FETCH_VERSION and \
                _has_zstd(records):
            error, records = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b""
        entry = {
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
        }
        if version >= 16 and error in LEADER_HINT_ERRORS:
            name = cache.topic_name(topic) if uses_topic_ids else topic
            leader_id, leader_epoch = current_leader(services, name, partition)
            entry["current_leader"] = {"leader_id": leader_id, "leader_epoch": leader_epoch}
            if leader_id >= 0:
                leaders.add(leader_id)
        by_topic.setdefault(topic, []).append(entry)
    response = {
        "throttle_time_ms": 0,
        "error_code": answer.error,
        "session_id": answer.session_id,
        "responses": [{"topic_id": t.bytes, "partitions": ps} if uses_topic_ids
                      else {"topic": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    if leaders:
        # Only live leaders, at their address on this request's listener (KIP-951).
        endpoints = cache.brokers_for(ctx.listener)
        response["node_endpoints"] = [
            {"node_id": b, "host": endpoints[b][0], "port": endpoints[b][1], "rack": None}
            for b in sorted(leaders) if b in endpoints]
    return response


def _quota_throttle(ctx: RequestContext, params: FetchParams):
    """A consumer's quotas, as Kafka's handleFetchRequest: max_bytes capped at what the fetch
    quota allows in its window; then the response's size on consumer_byte_rate and the time so
    far on request_percentage; when either throttles, the size is taken back and the response
    carries no partitions. Followers are never throttled (replication quotas are not served)."""
    quotas = ctx.services.quotas
    if quotas is None:
        return None
    ctx.request_quota_recorded = True
    if params.is_from_follower or not quotas.enabled("fetch", "request"):
        return None
    user, client_id = ctx.quota_user, ctx.client_id
    window_bytes = quotas.fetch.max_value_in_quota_window(user, client_id)
    params.max_bytes = min(params.max_bytes, int(min(window_bytes, 2**31 - 1)))
    params.min_bytes = min(params.min_bytes, params.max_bytes)

    def throttle(response_size: int) -> int:
        bandwidth_ms = quotas.fetch.record(user, client_id, response_size)
        request_ms = (quotas.request.record_nanos(user, client_id, ctx.handler_time_ns())
                      if ctx.handler_time_ns is not None else 0)
        if max(bandwidth_ms, request_ms) <= 0:
            return 0
        quotas.fetch.unrecord(user, client_id, response_size)
        ctx.throttle("fetch", bandwidth_ms)
        ctx.throttle("request", request_ms)
        return ctx.throttle_ms

    return throttle


def current_leader(services: BrokerServices, topic: str | None, partition: int) -> tuple[int, int]:
    """The partition's leader and epoch as this broker knows them: its replica's view when it hosts
    one, else the metadata's (Kafka's getCurrentLeader); (-1, -1) when neither knows."""
    if not topic:
        return -1, -1
    hosted = services.replica_manager.partitions.get((topic, partition))
    if hosted is not None:
        return hosted.leader_id, hosted.leader_epoch
    state = services.metadata_cache.partition_state(topic, partition)
    return (state.leader, state.leader_epoch) if state is not None else (-1, -1)
