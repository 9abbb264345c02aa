"""Metadata (key 3), v0-12: brokers, controller, cluster id, and topics with their partitions.

- Topics: v0 empty list = all topics; v1+ null = all. v10+ may name topics by id.
- Auto-creation when the request allows it (v4+, always before) and `auto.create.topics.enable`.
  Creation is immediate here, so the new topic is returned at once with its leader.
- Invalid names get INVALID_TOPIC_EXCEPTION, unknown ones UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid

from broker.handlers import RequestContext, register
from protocol.errors import ErrorCode, KafkaError

ZERO_UUID = bytes(16)  # "no topic id" on the wire
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _topic_entry(ctx: RequestContext, topic, error: ErrorCode = ErrorCode.NONE) -> dict:
    rm = ctx.broker.replica_manager
    partitions = []
    for index in range(topic.num_partitions):
        partition = rm.partitions.get((topic.name, index))
        if partition is None:
            partitions.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE,
                               "partition_index": index, "leader_id": -1})
            continue
        partitions.append({
            "error_code": ErrorCode.NONE,
            "partition_index": index,
            "leader_id": partition.leader_id,
            "leader_epoch": partition.leader_epoch,
            "replica_nodes": partition.replicas,
            "isr_nodes": partition.isr,
            "offline_replicas": [],
        })
    return {
        "error_code": error,
        "name": topic.name,
        "topic_id": topic.topic_id.bytes,
        "is_internal": topic.internal,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _error_entry(name: str | None, error: ErrorCode, topic_id: bytes = ZERO_UUID) -> dict:
    return {"error_code": error, "name": name, "topic_id": topic_id, "partitions": [],
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


@register(3, "Metadata", 0, 12)
async def handle(ctx: RequestContext, request) -> dict:
    broker = ctx.broker
    registry = broker.registry
    version = ctx.api_version
    auto_create = broker.config["auto.create.topics.enable"] and (
        version < 4 or request.allow_auto_topic_creation
    )
    if request.topics is None or (version == 0 and not request.topics):
        topics = [_topic_entry(ctx, t) for t in sorted(registry.topics.values(), key=lambda t: t.name)]
    else:
        topics = []
        for requested in request.topics:
            name = requested.name
            if name is None:  # v10+: by topic id
                topic = registry.by_id.get(uuid.UUID(bytes=requested.topic_id))
                topics.append(_topic_entry(ctx, topic) if topic else
                              _error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, requested.topic_id))
                continue
            topic = registry.get(name)
            if topic is None:
                try:
                    if not auto_create:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    topic = broker.admin.auto_create_topic(name)
                except KafkaError as exc:
                    topics.append(_error_entry(name, exc.code))
                    continue
            topics.append(_topic_entry(ctx, topic))
    host, port = broker.advertised_address
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": broker.broker_id, "host": host, "port": port, "rack": None}],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.broker_id,
        "topics": topics,
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }
