"""IncrementalAlterConfigs (key 44), v0-1: change single topic (resource type 2), broker (4) or
group (32) configs.

- Operations per config: SET (0), DELETE (1: back to the default), APPEND (2) and SUBTRACT (3) on
  list configs (Kafka's LIST type: cleanup.policy, the replication throttles), starting from the
  override, else the topic config's default, as Kafka's prepareIncrementalConfigs: APPEND keeps
  the existing items and adds those not there yet; SUBTRACT removes them, and may leave an empty
  list (an emptied cleanup.policy is valid: the log is then neither deleted by retention nor
  compacted). APPEND/SUBTRACT on another config: INVALID_CONFIG.
- As Kafka's ConfigAdminManager.preprocess: a resource named twice (both INVALID_REQUEST), a key
  named twice, a null value for anything but DELETE, an unknown operation: INVALID_REQUEST. The
  result is validated and propagated as AlterConfigs does (see alter_configs.py). On a broker,
  APPEND/SUBTRACT work on its list log settings (log.cleanup.policy), from its dynamic value, else
  the topic config's default.
"""

from __future__ import annotations

from collections import Counter

from broker.admin.admin_manager import RESOURCE_BROKER, RESOURCE_TOPIC
from broker.handlers import RequestContext, register
from broker.handlers.alter_configs import alter_resource, answer_durably
from broker.metadata.dynamic_broker_configs import LOG_CONFIG_SYNONYMS
from protocol.errors import ErrorCode, KafkaError
from storage.log_config import TOPIC_CONFIG_DEFAULTS

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _java_split(value: str) -> list[str]:
    """String.split(",") as Java does it: trailing empty strings dropped, "" gives [""]."""
    parts = value.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return [] if parts == [""] and value else parts


def _list_default(name: str) -> str:
    spec = TOPIC_CONFIG_DEFAULTS[name]
    return spec.render(spec.default)


def _check_request(resource) -> None:
    """Kafka's ConfigAdminManager.preprocess: keys named once, a value for everything but DELETE."""
    if len({c.name for c in resource.configs}) != len(resource.configs):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    missing = [c.name for c in resource.configs if c.config_operation != DELETE and c.value is None]
    if missing:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "Null value not supported for : " + ", ".join(missing))


def _list_config(resource, name: str) -> str | None:
    """The topic config whose list kind and default a key takes: the key itself on a topic, the
    topic config a broker's log setting is the default of (log.cleanup.policy) on a broker."""
    if resource.resource_type == RESOURCE_BROKER:
        return LOG_CONFIG_SYNONYMS.get(name, (None, 1))[0]
    return name if resource.resource_type == RESOURCE_TOPIC else None


def _incremental(resource):
    def change(current: dict[str, str]) -> dict[str, str]:
        updated = dict(current)
        for config in resource.configs:
            op, name, value = config.config_operation, config.name, config.value
            if op == SET:
                updated[name] = value
            elif op == DELETE:
                updated.pop(name, None)
            elif op in (APPEND, SUBTRACT):
                # Kafka's prepareIncrementalConfigs: the override as stored, else the topic
                # config's own default (not the broker's); no trimming, no de-duplication of
                # what is appended, SUBTRACT removes one occurrence per item (Scala's diff).
                list_name = _list_config(resource, name)
                spec = TOPIC_CONFIG_DEFAULTS.get(list_name) if list_name else None
                if spec is None:  # Kafka looks the key up in a map that throws: no message
                    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR)
                verb = "append" if op == APPEND else "subtract"
                if spec.kind != "list":
                    raise KafkaError(ErrorCode.INVALID_CONFIG,
                                     f"Config value {verb} is not allowed for config key: {name}")
                old = current.get(name, _list_default(list_name))
                if op == APPEND:
                    items = _java_split(old) if old else []
                    items += [v for v in _java_split(value) if v not in items]
                else:
                    items = _java_split(old) if old else [""]
                    for v in _java_split(value):
                        if v in items:
                            items.remove(v)
                updated[name] = ",".join(items)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
        return updated

    return change


def _refused(resource, exc: KafkaError) -> dict:
    return {"error_code": exc.code, "error_message": exc.message or exc.code.name,
            "resource_type": resource.resource_type, "resource_name": resource.resource_name}


@register(44)
async def handle(ctx: RequestContext, request) -> dict:
    named = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            _check_request(resource)
        except KafkaError as exc:
            responses.append(_refused(resource, exc))
            continue
        responses.append(await alter_resource(ctx, resource, _incremental(resource),
                                              request.validate_only))
    return await answer_durably(ctx, responses)
