"""ConsumerGroupHeartbeat (key 68), v0-1: the KIP-848 consumer group protocol. A member joins
(member epoch 0), heartbeats with its epoch and, when they changed, its subscription and the
partitions it owns, and leaves (-1, or -2 for a static member); each answer carries its member
epoch and, when it changed, its assignment (topic ids), which the coordinator reconciles as
Kafka 4's does (see coordinator/group/consumer_group.py).

- v1 (Kafka 4.0): the consumer makes its member id; v0: the coordinator makes it on the join.
- With `feature.levels` group.version=0, UNSUPPORTED_VERSION (no message), before any
  authorization, as a ZooKeeper-mode Kafka 3.9 broker answers.
- v1 subscribes by topic regex too (RE2, as Kafka's RE2/J: a topic matching in full is
  subscribed; INVALID_REGULAR_EXPRESSION for one that does not compile; "" clears it, which
  librdkafka sends for none).
- READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each subscribed topic name
  (TOPIC_AUTHORIZATION_FAILED), as Kafka's KafkaApis. Topics a regex matches are kept to those
  the heartbeating principal may DESCRIBE (Kafka's KAFKA-18813), when the group's regexes are
  resolved.
"""

from __future__ import annotations

import uuid

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode, KafkaError


def heartbeat_error(code: ErrorCode, message: str | None) -> dict:
    """A consumer or share group heartbeat's refusal (the two answers have the same fields)."""
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


@register(68)
async def handle(ctx: RequestContext, request) -> dict:
    if ctx.services.config["feature.levels"]["group.version"] < 1:  # as a ZK-mode Kafka 3.9
        return heartbeat_error(ErrorCode.UNSUPPORTED_VERSION, None)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return heartbeat_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    topics = request.subscribed_topic_names
    if topics is not None and not all(
            authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in topics):
        return heartbeat_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    if request.member_epoch == 0:  # Kafka's checks of a join
        if ctx.api_version >= 1 and not request.member_id:
            return heartbeat_error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if request.topic_partitions is None:
            return heartbeat_error(ErrorCode.INVALID_REQUEST,
                          "TopicPartitions must be set when MemberEpoch is 0.")
        if request.topic_partitions:
            return heartbeat_error(ErrorCode.INVALID_REQUEST,
                          "TopicPartitions must be empty when (re-)joining.")
    cache = ctx.services.metadata_cache
    owned = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            name = cache.topic_name(uuid.UUID(bytes=bytes(tp.topic_id)))
            if name is not None:  # a deleted topic's partitions are owned by nobody
                owned.setdefault(name, set()).update(tp.partitions)
    try:
        answer = await ctx.services.group_coordinator.handle_consumer_group_heartbeat(
            request.group_id, request.member_id, request.member_epoch,
            instance_id=request.instance_id, rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms, subscribed_topics=topics,
            server_assignor=request.server_assignor, owned=owned,
            client_id=ctx.header.client_id or "", client_host=f"/{ctx.client_host}",
            subscribed_regex=request.get("subscribed_topic_regex"),
            describable=None if ctx.services.authorizer is None else (
                lambda topic: authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)))
    except KafkaError as exc:
        return heartbeat_error(exc.code, exc.message)
    assignment = None
    if answer.assignment is not None:
        ids = cache.topics
        assignment = {"topic_partitions": [
            {"topic_id": ids[t].topic_id.bytes, "partitions": sorted(ps)}
            for t, ps in sorted(answer.assignment.items()) if t in ids and ps]}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "member_id": answer.member_id, "member_epoch": answer.member_epoch,
            "heartbeat_interval_ms": answer.heartbeat_interval_ms, "assignment": assignment}
