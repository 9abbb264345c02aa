"""AlterConfigs (key 33), v0-2: replace a topic's (resource type 2) config overrides as a whole.

- Entries with a null value are dropped, so what is not named returns to its default (Kafka's
  behaviour). The new set is validated with LogConfig: INVALID_CONFIG with a message per resource;
  validate_only checks without writing. Written to `/config/topics/<topic>`; the controller's watch
  on that node propagates it (UpdateMetadata), and DescribeConfigs shows DYNAMIC_TOPIC_CONFIG.
- Broker resources (type 4): Kafka's dynamic broker configs, for one broker (its id) or every
  broker ("", the cluster default), kept at /config/brokers/<id> or <default> and applied after
  the change notification (broker/metadata/dynamic_broker_configs.py): the log settings become
  every log's defaults at once. A setting Kafka cannot change live: INVALID_REQUEST "Cannot
  update these configs dynamically: Set(...)"; a per-broker one (listeners, security) at the
  cluster default: INVALID_REQUEST.
- Group resources (type 32, Kafka 4's group configs): written to `/config/groups/<group>`, read by
  every broker again after the change notification (broker/metadata/group_configs.py); a key that
  is no group config, or a value it does not take: INVALID_CONFIG.
- Other resource types, an unknown topic: INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.admin.admin_manager import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize, require_cluster
from protocol.errors import ErrorCode, KafkaError


async def alter_resource(
    ctx: RequestContext, resource, change: Callable[[dict[str, str]], dict[str, str]],
    validate_only: bool,
) -> dict:
    """Apply `change` (current overrides -> new overrides) to one resource; its response entry."""
    admin = ctx.services.admin_manager
    name = resource.resource_name
    try:
        if resource.resource_type == RESOURCE_TOPIC:
            if not authorize(ctx, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            overrides = await admin.topic_config_overrides(name)
            await admin.alter_topic_configs(name, change(overrides), validate_only=validate_only)
        elif resource.resource_type == RESOURCE_BROKER:
            require_cluster(ctx, AclOperation.ALTER_CONFIGS)
            overrides = await admin.broker_config_overrides(name)
            await admin.alter_broker_configs(name, change(overrides), validate_only=validate_only)
        elif resource.resource_type == RESOURCE_GROUP:
            if not authorize(ctx, AclOperation.ALTER_CONFIGS, ResourceType.GROUP, name):
                raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            overrides = await admin.group_config_overrides(name)
            await admin.alter_group_configs(name, change(overrides), validate_only=validate_only)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"unsupported resource type {resource.resource_type}")
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": exc.message or exc.code.name,
                "resource_type": resource.resource_type, "resource_name": name}
    return {"error_code": ErrorCode.NONE, "error_message": None,
            "resource_type": resource.resource_type, "resource_name": name}


async def answer_durably(ctx: RequestContext, responses: list[dict]) -> dict:
    """The response once what was altered is durable in the store (else KAFKA_STORAGE_ERROR)."""
    try:
        await ctx.services.admin_manager.sync_store()
    except KafkaError as exc:
        for r in responses:
            if r["error_code"] == ErrorCode.NONE:
                r["error_code"], r["error_message"] = exc.code, exc.message
    return {"throttle_time_ms": 0, "responses": responses}


@register(33)
async def handle(ctx: RequestContext, request) -> dict:
    responses = [
        await alter_resource(ctx, resource,
                       lambda _current, r=resource: {c.name: c.value for c in r.configs
                                                     if c.value is not None},
                       request.validate_only)
        for resource in request.resources
    ]
    return await answer_durably(ctx, responses)
