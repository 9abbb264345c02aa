"""Metadata (key 3), v0-12: live brokers, controller, cluster id, topics and partition states.

- Answered from this broker's metadata cache (the controller's last UpdateMetadata).
- Topics: v0 empty list = all topics; v1+ null = all. v10+ may name topics by id.
- v10/11 may not leave a topic's name null (by id is v12+): the connection is closed.
- A topic named twice is answered once (Kafka reads the names as a set).
- Auto-creation when the request allows it (v4+, always before) and `auto.create.topics.enable`:
  the topic is written to the metadata store and answered LEADER_NOT_AVAILABLE until the
  controller has elected its leaders, as Kafka does; clients retry. One request creates at most
  CreateTopics' 10,000 partitions; topics past that get POLICY_VIOLATION and are not created.
- Partitions without a live leader: LEADER_NOT_AVAILABLE, leader -1; replicas on stopped brokers
  are listed as offline.
- With an authorizer: all topics means those the principal may DESCRIBE; a listed topic it may
  not describe is TOPIC_AUTHORIZATION_FAILED whether or not it exists, and auto-creation needs
  CREATE on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED). Authorized operations
  (v8+) are reported when asked for.
"""

from __future__ import annotations

import asyncio
import uuid

from broker import admin
from broker.controller.pacing import serve_others
from broker.handlers import RequestContext, register
from broker.handlers.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
    authorized_operations,
)
from broker.metadata.metadata_cache import TopicInfo
from protocol.errors import ErrorCode, KafkaError, ProtocolDecodeError

ZERO_UUID = bytes(16)  # "no topic id" on the wire


def _topic_entry(ctx: RequestContext, topic: TopicInfo, operations: bool = False) -> dict:
    cache = ctx.services.metadata_cache
    live = cache.brokers  # membership only: the same ids on every listener
    on_failed_dirs = cache.snapshot.offline_replicas
    partitions = []
    for index, replicas in sorted(topic.assignment.items()):
        state = cache.partition_state(topic.name, index)
        leader = state.leader if state is not None else -1
        partitions.append({
            "error_code": ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": index,
            "leader_id": leader,
            "leader_epoch": state.leader_epoch if state is not None else -1,
            "replica_nodes": replicas,
            "isr_nodes": state.isr if state is not None else [],
            "offline_replicas": [r for r in replicas if r not in live
                                 or r in on_failed_dirs.get((topic.name, index), ())],
        })
    return {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.topic_id.bytes,
        "is_internal": topic.internal,
        "partitions": partitions,
        "topic_authorized_operations": (
            authorized_operations(ctx, ResourceType.TOPIC, topic.name) if operations
            else AUTHORIZED_OPERATIONS_OMITTED),
    }


def _error_entry(name: str | None, error: ErrorCode, topic_id: bytes = ZERO_UUID) -> dict:
    return {"error_code": error, "name": name, "topic_id": topic_id, "partitions": [],
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


# A response of more topic and partition entries than this is encoded off the event loop.
LARGE_RESPONSE_ENTRIES = 2000
# Auto-created topics written to the store at once (pipelined on ZooKeeper), the loop served
# between two such groups.
CREATE_BATCH = 200


def _lookup(ctx: RequestContext, requested, auto_create: bool, operations: bool,
            to_create: list[str]) -> dict:
    """The topic's entry; a topic to auto-create is added to `to_create` (and answered
    LEADER_NOT_AVAILABLE, or its creation's error once tried)."""
    cache = ctx.services.metadata_cache
    name = requested.name
    if name is None:  # v10+: by topic id
        topic = cache.topic_by_id(uuid.UUID(bytes=requested.topic_id))
        if topic is None:
            return _error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, requested.topic_id)
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
            return _error_entry(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)  # nor name nor id
        return _topic_entry(ctx, topic, operations)
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)  # exists or not: not said
    topic = cache.topic(name)
    if topic is not None:
        return _topic_entry(ctx, topic, operations)
    if not auto_create:
        return _error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not (authorize_cluster(ctx, AclOperation.CREATE)
            or authorize(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)):
        return _error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    to_create.append(name)
    return _error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE)


async def _auto_create(ctx: RequestContext, names: list[str]) -> dict[str, ErrorCode]:
    """Create the topics a request named, within CreateTopics' partition budget (each gets
    `num.partitions`); per topic the error that kept it from being created."""
    creation = ctx.services.auto_topic_creation
    each = max(1, ctx.services.config["num.partitions"])
    # The topic admin's module loads with the first auto-creation, not the first Metadata
    within = max(0, admin.admin_manager.MAX_PARTITIONS_PER_REQUEST // each)
    errors = dict.fromkeys(names[within:], ErrorCode.POLICY_VIOLATION)

    async def create(name: str) -> None:
        try:
            await creation.create_topic(name)
        except KafkaError as exc:
            # already on its way, or the store unreachable (the client asks again): as Kafka
            if exc.code not in (ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.REQUEST_TIMED_OUT):
                errors[name] = exc.code

    for start in range(0, min(within, len(names)), CREATE_BATCH):
        if start:
            await serve_others()
        await asyncio.gather(*(create(n) for n in names[start : min(within, start + CREATE_BATCH)]))
    return errors


def live_brokers(ctx: RequestContext) -> dict[int, tuple[str, int]]:
    """The live brokers' endpoints on the request's listener (this broker alone until the
    controller's first UpdateMetadata)."""
    services = ctx.services
    return services.metadata_cache.brokers_for(ctx.listener) or {
        services.broker_id: services.advertised_address(ctx.listener)}


@register(3)
async def handle(ctx: RequestContext, request) -> dict:
    services = ctx.services
    cache = services.metadata_cache
    version = ctx.api_version
    auto_create = services.config["auto.create.topics.enable"] and (
        version < 4 or request.allow_auto_topic_creation
    )
    operations = request.get("include_topic_authorized_operations", False)
    if request.topics is None or (version == 0 and not request.topics):
        topics = [_topic_entry(ctx, t, operations) for name, t in sorted(cache.topics.items())
                  if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)]
    else:
        if version < 12 and any(t.name is None for t in request.topics):
            # Kafka refuses it too (topic ids are for v12+): a v10/11 response has no way to
            # name the topic, so there is no reply to write; the connection is closed.
            raise ProtocolDecodeError(f"Metadata v{version}: topic name can not be null")
        to_create: list[str] = []
        # Each topic once: by name or, v10+, by id (a name first seen wins its place)
        unique = {(t.name if t.name is not None else t.topic_id): t for t in request.topics}
        topics = [_lookup(ctx, requested, auto_create, operations, to_create)
                  for requested in unique.values()]
        if to_create:
            errors = await _auto_create(ctx, to_create)
            if errors:
                topics = [_error_entry(t["name"], errors[t["name"]])
                          if t["name"] in errors else t for t in topics]
    brokers = live_brokers(ctx)
    ctx.large_response = sum(len(t["partitions"]) + 1 for t in topics) > LARGE_RESPONSE_ENTRIES
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b, "host": h, "port": p, "rack": None}
                    for b, (h, p) in sorted(brokers.items())],
        "cluster_id": services.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
        "cluster_authorized_operations": (
            authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if request.get("include_cluster_authorized_operations", False)
            else AUTHORIZED_OPERATIONS_OMITTED),
    }
