"""AlterClientQuotas (key 49), v0-1 (KIP-546): set or remove quota keys of user, client-id and
(user, client-id) entities (a null name: the `<default>` entity), as ZooKeeper-mode Kafka does.

- Each entity is answered alone: an empty entity, an unknown or empty-named entity type, ip with
  user/client-id, an unknown key, a fractional value for a byte rate: INVALID_REQUEST and nothing
  of that entity is written. Removing a key never fails. A SCRAM mechanism as a key:
  UNKNOWN_SERVER_ERROR (Kafka's "Unexpected config type PASSWORD"). IP entities are refused.
- The node is written whole with a /config/changes notification, so every broker applies it;
  validate_only checks without writing. An entity listed twice is altered twice, answered once.
- With an authorizer: ALTER_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED for each.
"""

from __future__ import annotations

import asyncio

from broker.admin.client_quotas import alter, java_map_order
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode, KafkaError

YIELD_EVERY = 50


@register(49)
async def handle(ctx: RequestContext, request) -> dict:
    configs = ctx.services.client_quota_configs
    assert configs is not None
    allowed = authorize_cluster(ctx, AclOperation.ALTER_CONFIGS)
    results: dict[tuple, tuple[dict, int, str | None]] = {}
    wrote = False
    for index, entry in enumerate(request.entries):
        if index % YIELD_EVERY == YIELD_EVERY - 1:
            # Each entity is a node write and a notification every broker reads at once: let
            # other connections in now and then, so that thousands of entities in one request
            # delay them by a slice, not by the whole request
            await asyncio.sleep(0)
        # a repeated type: the last wins; the order of Kafka's HashMap (client-id before user)
        entity = java_map_order({e.entity_type: e.entity_name for e in entry.entity})
        code, message = ErrorCode.NONE, None
        if not allowed:
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        else:
            try:
                await alter(configs, entity, [(op.key, op.value, op.remove) for op in entry.ops],
                      request.validate_only)
                wrote = wrote or not request.validate_only
            except KafkaError as exc:
                code, message = exc.code, exc.message
        results[tuple(entity.items())] = (entity, code, message)
    if wrote:
        await configs.store.flush()  # durable before the client hears it is done
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": message,
         "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()]}
        for entity, code, message in results.values()]}
