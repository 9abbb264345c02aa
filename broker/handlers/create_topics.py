"""CreateTopics (key 19), v0-7: create topics with partitions and configs, or only validate.

- num_partitions / replication_factor -1 (v4+) take the broker defaults.
- Manual replica assignments are validated as Kafka's AdminZkClient.validateTopicCreate does
  (INVALID_REPLICA_ASSIGNMENT: no empty list, as many replicas in every list, no broker twice,
  partitions 0..n-1, only registered brokers).
- A request may create at most 10,000 partitions in all (Kafka's controller limit,
  MAX_RECORDS_PER_USER_OP): a topic beyond that gets POLICY_VIOLATION "Unable to perform
  excessively large batch operation.", checked before anything proportional to the count.
- The answer waits (up to timeout_ms) until the controller has elected every partition's leader.
- Errors per topic: INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
  INVALID_REPLICATION_FACTOR, INVALID_CONFIG, INVALID_REQUEST (a topic named twice).
"""

from __future__ import annotations

from broker.admin.admin_manager import MAX_PARTITIONS_PER_REQUEST
from broker.handlers import RequestContext, refuse_repeated, register, repeated_topics
from broker.handlers.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_authorized,
)
from protocol.errors import ErrorCode, KafkaError


async def _create(ctx: RequestContext, request, topic, budget: int, configs_shown: bool) -> dict:
    admin = ctx.services.admin_manager
    num_partitions, replication_factor = topic.num_partitions, topic.replication_factor
    if topic.assignments and (num_partitions != -1 or replication_factor != -1):
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "both partitions/replication factor and assignments were given")
    assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
    validate_only = request.get("validate_only", False)
    created = await admin.create_topic(
        topic.name,
        num_partitions,
        replication_factor,
        {c.name: c.value for c in topic.configs},
        assignment=assignment,
        validate_only=validate_only,
        timeout_ms=request.timeout_ms,
        max_partitions=budget,
    )
    return {
        "name": topic.name,
        "topic_id": created.topic_id.bytes,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "num_partitions": created.num_partitions,
        "replication_factor": created.replication_factor,
        "configs": [
            {"name": e.name, "value": e.value, "read_only": e.read_only,
             "config_source": e.source,
             "is_sensitive": False}
            for e in (admin.topic_configs(topic.name) if admin.cache.topic(topic.name) else [])
        ] if configs_shown else [],
        # without DESCRIBE_CONFIGS on the topic the answer leaves its configs out, and says why
        "topic_config_error_code": ErrorCode.NONE if configs_shown else ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }


@register(19)
async def handle(ctx: RequestContext, request) -> dict:
    repeated = repeated_topics(t.name for t in request.topics)
    results = []
    budget = MAX_PARTITIONS_PER_REQUEST  # partitions this request may still create
    names = [t.name for t in request.topics]
    creatable = (set(names) if authorize_cluster(ctx, AclOperation.CREATE)
                 else filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, names))
    configs_shown = filter_authorized(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
    for topic in request.topics:
        try:
            refuse_repeated(repeated, topic.name)
            if topic.name not in creatable:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            results.append(created := await _create(ctx, request, topic, budget,
                                                    topic.name in configs_shown))
            budget -= created["num_partitions"]
        except KafkaError as exc:
            results.append({"name": topic.name, "error_code": exc.code,
                            "error_message": exc.message or None, "configs": None})
    return {"throttle_time_ms": 0, "topics": results}
