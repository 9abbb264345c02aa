"""DescribeClientQuotas (key 48), v0-1 (KIP-546): the quota values of the user, client-id and
(user, client-id) entities a filter matches, as ZooKeeper-mode Kafka answers.

- Components: EXACT (a name), DEFAULT (the `<default>` entity), ANY (any entity with that part);
  strict leaves out entities with parts the filter does not name. Entities without a quota key
  (a user with SCRAM credentials only) are not listed.
- A repeated or empty entity type, or ip mixed with user/client-id: INVALID_REQUEST; another
  entity type: UNSUPPORTED_VERSION; an unknown match type, or EXACT without a name:
  UNKNOWN_SERVER_ERROR (Kafka fails parsing the filter). The error is the request's, entries null.
- IP entities are not kept here: an ip filter matches nothing.
- With an authorizer: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.admin.client_quotas import FilterComponent, describe
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode, KafkaError


def _error(code: int, message: str | None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
            "entries": None}


@register(48)
async def handle(ctx: RequestContext, request) -> dict:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    configs = ctx.services.client_quota_configs
    assert configs is not None
    components = [FilterComponent(c.entity_type, c.match_type, c.match)
                  for c in request.components]
    try:
        found = await describe(configs, components, request.strict)
    except KafkaError as exc:
        return _error(exc.code, exc.message)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "entries": [
                {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                 "values": [{"key": k, "value": v} for k, v in values.items()]}
                for entity, values in found]}
