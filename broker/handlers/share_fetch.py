"""ShareFetch (key 78), v1-2: a share consumer's fetch (KIP-932). Within its share session (epoch 0
opens it, -1 closes it, else the session's next epoch) it acknowledges records it was given and
acquires more from the session's partitions this broker leads; the answer carries the batches
holding the acquired records and, per partition, the acquired offset ranges with their delivery
counts, and the acquisition lock's duration (broker/share/ does the work).

- With `feature.levels` share.version=0, UNSUPPORTED_VERSION.
- READ on the group (GROUP_AUTHORIZATION_FAILED for the request), READ on each topic
  (TOPIC_AUTHORIZATION_FAILED for its partitions); an unknown topic id: UNKNOWN_TOPIC_ID.
- Session errors are the request's: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
  SHARE_SESSION_LIMIT_REACHED; a bad acknowledgement is its partition's
  (INVALID_RECORD_STATE, INVALID_REQUEST) and the records are still fetched.
- v2: ShareAcquireMode 0 acquires whole batches (as v1), 1 (record-limit, KIP-1206) no more
  than MaxRecords, cutting a batch, and 255 (renew) acquires nothing; Renew acknowledgements
  (type 4, KIP-1222) keep records acquired under a new lock of the full duration. An unknown
  mode: INVALID_REQUEST.
"""

from __future__ import annotations

import uuid

from broker import share
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.handlers.fetch import LEADER_HINT_ERRORS, current_leader
from protocol.errors import ErrorCode


def share_partitions_of(ctx: RequestContext, topics) -> tuple[list, list]:
    """The request's partitions (with their acknowledgements) it may read, and the answers of
    those it may not (TOPIC_AUTHORIZATION_FAILED)."""
    manager = share.share_partition_manager
    names = ctx.services.metadata_cache.topic_name
    allowed, refused = [], []
    for t in topics:
        topic_id = uuid.UUID(bytes=bytes(t.topic_id))
        name = names(topic_id) or ""
        ok = not name or authorize(ctx, AclOperation.READ, ResourceType.TOPIC, name)
        for p in t.partitions:
            acks = [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                    for b in p.acknowledgement_batches]
            entry = manager.ShareFetchPartition(topic_id, name, p.partition_index, acks)
            (allowed if ok else refused).append(entry)
    return allowed, refused


def share_response(ctx: RequestContext, answer, refused: list, *, records: bool) -> dict:
    """The response body of a ShareFetch (`records`) or a ShareAcknowledge."""
    manager = share.share_partition_manager
    partitions = dict(answer.partitions)
    for p in refused:
        partitions[p.key] = manager.SharePartitionData(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    names = ctx.services.metadata_cache.topic_name
    by_topic: dict[uuid.UUID, list[dict]] = {}
    leaders: set[int] = set()
    for (topic_id, index), data in partitions.items():
        leader_id, leader_epoch = current_leader(ctx.services, names(topic_id), index)
        if data.error in LEADER_HINT_ERRORS and leader_id >= 0:
            leaders.add(leader_id)
        entry = {"partition_index": index, "error_code": data.error,
                 "error_message": data.error_message,
                 "current_leader": {"leader_id": leader_id, "leader_epoch": leader_epoch}}
        if records:
            entry.update(
                acknowledge_error_code=data.acknowledge_error,
                acknowledge_error_message=data.acknowledge_error_message,
                records=data.records,
                acquired_records=[{"first_offset": f, "last_offset": la, "delivery_count": c}
                                  for f, la, c in data.acquired])
        by_topic.setdefault(topic_id, []).append(entry)
    endpoints = ctx.services.metadata_cache.brokers_for(ctx.listener) if leaders else {}
    body = {"throttle_time_ms": 0, "error_code": answer.error,
            "error_message": answer.error_message,
            "responses": [{"topic_id": t.bytes, "partitions": ps} for t, ps in by_topic.items()],
            "node_endpoints": [
                {"node_id": b, "host": endpoints[b][0], "port": endpoints[b][1], "rack": None}
                for b in sorted(leaders) if b in endpoints]}
    body["acquisition_lock_timeout_ms"] = answer.acquisition_lock_timeout_ms  # (Ack v2+)
    return body


def request_error(code: ErrorCode, message: str | None, *, records: bool) -> dict:
    body = {"throttle_time_ms": 0, "error_code": code, "error_message": message,
            "responses": [], "node_endpoints": []}
    body["acquisition_lock_timeout_ms"] = 0
    return body


def check_request(ctx: RequestContext, request, *, records: bool) -> dict | None:
    """The request-level refusals ShareFetch and ShareAcknowledge share; None when it may go."""
    if ctx.services.config["feature.levels"]["share.version"] < 1:
        return request_error(ErrorCode.UNSUPPORTED_VERSION, None, records=records)
    if not request.group_id:
        return request_error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.",
                             records=records)
    if not request.member_id:
        return request_error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.",
                             records=records)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return request_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None, records=records)
    return None


@register(78)
async def handle(ctx: RequestContext, request) -> dict:
    refusal = check_request(ctx, request, records=True)
    if refusal is not None:
        return refusal
    mode = request.get("share_acquire_mode", share.share_partition_manager.BATCH_OPTIMIZED)
    if mode not in share.share_partition_manager.ACQUIRE_MODES:
        return request_error(ErrorCode.INVALID_REQUEST, f"Unknown ShareAcquireMode {mode & 0xff}",
                             records=True)
    allowed, refused = share_partitions_of(ctx, request.topics)
    forgotten = [(uuid.UUID(bytes=bytes(t.topic_id)), p)
                 for t in request.forgotten_topics_data for p in t.partitions]
    answer = await ctx.services.share_partition_manager.share_fetch(
        request.group_id, request.member_id, request.share_session_epoch, allowed, forgotten,
        max_wait_ms=request.max_wait_ms, max_bytes=request.max_bytes,
        max_records=request.max_records, acquire_mode=mode, renew=ctx.api_version >= 2)
    return share_response(ctx, answer, refused, records=True)
