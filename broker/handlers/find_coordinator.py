"""FindCoordinator (key 10), v0-6: which broker coordinates a group or a transactional id (v4+:
several keys at once).

- The coordinator of a group is the leader of `__consumer_offsets` partition
  abs(hashCode(group)) % partitions; of a transactional id (key_type 1), the leader of
  `__transaction_state` partition abs(hashCode(id)) % partitions. The first lookup creates the
  topic (internal, compacted) and answers COORDINATOR_NOT_AVAILABLE until its leaders are
  elected; clients retry. Other key types get INVALID_REQUEST.
"""

from __future__ import annotations

import contextlib

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.metadata.topic_names import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode, KafkaError

KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
NO_NODE = {"node_id": -1, "host": "", "port": -1}


async def find_coordinator(ctx: RequestContext, key: str, key_type: int) -> dict:
    services = ctx.services
    if key_type == KEY_TYPE_GROUP and not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "error_message": None, **NO_NODE}
    if key_type == KEY_TYPE_TRANSACTION and not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "error_message": None,
                **NO_NODE}
    if key_type == KEY_TYPE_GROUP:
        topic, ensure = OFFSETS_TOPIC, services.auto_topic_creation.ensure_offsets_topic
        partition_for = services.group_coordinator.manager.partition_for
    elif key_type == KEY_TYPE_TRANSACTION:
        topic = TRANSACTION_STATE_TOPIC
        ensure = services.auto_topic_creation.ensure_transaction_state_topic
        partition_for = services.transaction_coordinator.manager.partition_for
    else:
        return {"error_code": ErrorCode.INVALID_REQUEST, "error_message": "unknown key type",
                **NO_NODE}
    cache = services.metadata_cache
    if cache.topic(topic) is None:
        with contextlib.suppress(KafkaError):  # the store unreachable: the client asks again
            await ensure()
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None, **NO_NODE}
    state = cache.partition_state(topic, partition_for(key))
    brokers = cache.brokers_for(ctx.listener)
    if state is None or state.leader not in brokers:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None, **NO_NODE}
    host, port = brokers[state.leader]
    return {"error_code": ErrorCode.NONE, "error_message": None, "node_id": state.leader,
            "host": host, "port": port}

@register(10)
async def handle(ctx: RequestContext, request) -> dict:
    key_type = request.get("key_type", KEY_TYPE_GROUP)
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            {"key": key, **await find_coordinator(ctx, key, key_type)}
            for key in request.coordinator_keys]}
    return {"throttle_time_ms": 0, **await find_coordinator(ctx, request.key, key_type)}
