"""DescribeConfigs (key 32), v0-4: topic (resource type 2), broker (4) and group (32) configs.

- v0 reports is_default; v1+ config_source and (when asked) synonyms; v3+ type and docs.
- As a ZooKeeper-mode Kafka 3.9 broker (broker/admin/config_describer.py): Kafka's type per config,
  the source of the first synonym (TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG), read-only
  unless Kafka can change the config dynamically, topic configs' synonyms chaining to their `log.*`
  broker configs, null for sensitive values and for unset configs without a default.
- An invalid topic name gets INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION,
  another broker id or an unsupported resource type INVALID_REQUEST, in that resource's result
  only; the broker resource "" (cluster-wide dynamic defaults) has no configs here.
- A group's configs (Kafka 4): each group config, GROUP_CONFIG when the group overrides it, else
  DEFAULT_CONFIG with the broker's group.* setting it comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.admin.admin_manager import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, require_cluster
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.admin.config_describer import ConfigEntry


async def _entries(ctx: RequestContext, resource) -> list[ConfigEntry]:
    admin = ctx.services.admin_manager
    if resource.resource_type == RESOURCE_TOPIC:
        if not authorize(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                         resource.resource_name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        return admin.topic_configs(resource.resource_name, ctx.services.dynamic_configs)
    if resource.resource_type == RESOURCE_BROKER:
        require_cluster(ctx, AclOperation.DESCRIBE_CONFIGS)
        name = resource.resource_name
        if not name:  # the cluster-wide dynamic defaults: there are none here
            return []
        if not (name.isascii() and name.lstrip("-").isdecimal()):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Broker id must be an integer, but it is: {name}")
        if int(name) != ctx.services.broker_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected "
                             f"{ctx.services.broker_id} or empty string, but received {name}")
        return admin.broker_configs(ctx.services.dynamic_configs)
    if resource.resource_type == RESOURCE_GROUP:
        if not authorize(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.GROUP,
                         resource.resource_name):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return await admin.group_configs(resource.resource_name)
    raise KafkaError(ErrorCode.INVALID_REQUEST,
                     f"unsupported resource type {resource.resource_type}")


@register(32)
async def handle(ctx: RequestContext, request) -> dict:
    results = []
    for resource in request.resources:
        base = {"resource_type": resource.resource_type, "resource_name": resource.resource_name}
        try:
            entries = await _entries(ctx, resource)
        except KafkaError as exc:
            # An unknown topic's result carries no message in Kafka's answer.
            message = None if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION \
                else exc.message or exc.code.name
            results.append({**base, "error_code": exc.code, "error_message": message,
                            "configs": []})
            continue
        keys = resource.configuration_keys
        if keys:  # null or empty: every config
            entries = [e for e in entries if e.name in set(keys)]
        configs = [
            {
                "name": e.name,
                "value": e.value,
                "read_only": e.read_only,
                "is_default": e.is_default,
                "config_source": e.source,
                "is_sensitive": e.sensitive,
                "synonyms": ([{"name": name, "value": value, "source": source}
                              for name, value, source in e.synonyms]
                             if request.get("include_synonyms") else []),
                "config_type": e.config_type,
                "documentation": e.documentation if request.get("include_documentation") else None,
            }
            for e in entries
        ]
        results.append({**base, "error_code": ErrorCode.NONE, "error_message": None,
                        "configs": configs})
    return {"throttle_time_ms": 0, "results": results}
