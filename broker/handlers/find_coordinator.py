"""FindCoordinator (key 10), v0-6: which broker coordinates a group (v4+: several keys at once).

- The coordinator of a group is the leader of `__consumer_offsets` partition
  abs(hashCode(group)) % partitions. The first lookup creates that topic (internal, compacted) and
  answers COORDINATOR_NOT_AVAILABLE until its leaders are elected; clients retry.
- Transactions are not implemented: a transaction key gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  as InitProducerId answers a transactional id; other key types get INVALID_REQUEST.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.metadata.topic_names import OFFSETS_TOPIC
from protocol.errors import ErrorCode

KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
NO_NODE = {"node_id": -1, "host": "", "port": -1}


def find_coordinator(ctx: RequestContext, key: str, key_type: int) -> dict:
    if key_type != KEY_TYPE_GROUP:
        error = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if key_type == KEY_TYPE_TRANSACTION
                 else ErrorCode.INVALID_REQUEST)
        return {"error_code": error, "error_message": error.name, **NO_NODE}
    cache = ctx.services.metadata_cache
    manager = ctx.services.group_coordinator.manager
    if cache.topic(OFFSETS_TOPIC) is None:
        ctx.services.auto_topic_creation.ensure_offsets_topic()
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None, **NO_NODE}
    state = cache.partition_state(OFFSETS_TOPIC, manager.partition_for(key))
    brokers = cache.brokers_for(ctx.listener)
    if state is None or state.leader not in brokers:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None, **NO_NODE}
    host, port = brokers[state.leader]
    return {"error_code": ErrorCode.NONE, "error_message": None, "node_id": state.leader,
            "host": host, "port": port}


@register(10, "FindCoordinator", 0, 6)
async def handle(ctx: RequestContext, request) -> dict:
    key_type = request.get("key_type", KEY_TYPE_GROUP)
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            {"key": key, **find_coordinator(ctx, key, key_type)} for key in request.coordinator_keys]}
    return {"throttle_time_ms": 0, **find_coordinator(ctx, request.key, key_type)}
