"""IncrementalAlterConfigs (key 44), v0-1: change single topic configs (resource type 2).

- Operations per config: SET (0), DELETE (1: back to the default), APPEND (2) and SUBTRACT (3) on
  list configs (Kafka's LIST type: cleanup.policy), starting from the current value (the override, else the default)
  as Kafka's prepareIncrementalConfigs does; APPEND/SUBTRACT on another config: INVALID_CONFIG.
- A key named twice in a resource or an unknown operation: INVALID_REQUEST. The result is validated
  and propagated as AlterConfigs does (see alter_configs.py), broker resources likewise refused.
"""

from __future__ import annotations

from collections import Counter

from broker.handlers import RequestContext, register
from broker.handlers.alter_configs import alter_resource, answer_durably
from protocol.errors import ErrorCode, KafkaError
from storage.log_config import TOPIC_CONFIG_DEFAULTS

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _incremental(ctx: RequestContext, resource):
    def change(current: dict[str, str]) -> dict[str, str]:
        duplicates = [n for n, count in Counter(c.name for c in resource.configs).items() if count > 1]
        if duplicates:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Error due to duplicate config keys: {sorted(duplicates)}")
        updated = dict(current)
        for config in resource.configs:
            op, name = config.config_operation, config.name
            if op == SET:
                if config.value is None:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"null value to set for {name}")
                updated[name] = config.value
            elif op == DELETE:
                updated.pop(name, None)
            elif op in (APPEND, SUBTRACT):
                spec = TOPIC_CONFIG_DEFAULTS.get(name)
                if spec is None or spec.kind != "list":
                    raise KafkaError(ErrorCode.INVALID_CONFIG,
                                     f"Config value append is not allowed for config key: {name}")
                effective = ctx.services.config.log_config(current).to_properties()[name]
                old = [v.strip() for v in effective.split(",") if v.strip()]
                values = [v.strip() for v in (config.value or "").split(",") if v.strip()]
                new = (old + [v for v in values if v not in old] if op == APPEND
                       else [v for v in old if v not in values])
                updated[name] = ",".join(new)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
        return updated

    return change


@register(44, "IncrementalAlterConfigs", 0, 1)
async def handle(ctx: RequestContext, request) -> dict:
    responses = [alter_resource(ctx, resource, _incremental(ctx, resource), request.validate_only)
                 for resource in request.resources]
    return await answer_durably(ctx, responses)
