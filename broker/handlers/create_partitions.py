"""CreatePartitions (key 37), v0-3: grow topics to a new partition count, or only validate.

- New partitions get replicas round-robin like new topics, or the assignments given (one list of
  brokers per new partition, as many as the topic's replication factor, all live).
- Errors per topic: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (fewer or as many partitions
  as now), INVALID_REPLICA_ASSIGNMENT (Kafka's AdminZkClient checks: unknown brokers, as many
  lists as new partitions, no empty list, no broker twice, the topic's replication factor),
  INVALID_REPLICATION_FACTOR, INVALID_REQUEST (a topic named twice), POLICY_VIOLATION when the
  request would add more than 10,000 partitions (Kafka's controller limit), REQUEST_TIMED_OUT when
  the new partitions have no leaders within timeout_ms.
"""

from __future__ import annotations

from broker.admin.admin_manager import MAX_PARTITIONS_PER_REQUEST
from broker.handlers import RequestContext, refuse_repeated, register, repeated_topics
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from protocol.errors import ErrorCode, KafkaError


@register(37)
async def handle(ctx: RequestContext, request) -> dict:
    repeated = repeated_topics(t.name for t in request.topics)
    results = []
    budget = MAX_PARTITIONS_PER_REQUEST  # new partitions this request may still add
    for topic in request.topics:
        try:
            refuse_repeated(repeated, topic.name)
            if not authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            assignments = ([list(a.broker_ids) for a in topic.assignments]
                           if topic.assignments is not None else None)
            budget -= await ctx.services.admin_manager.create_partitions(
                topic.name, topic.count, assignments, validate_only=request.validate_only,
                timeout_ms=request.timeout_ms, max_partitions=budget)
            results.append({"name": topic.name, "error_code": ErrorCode.NONE})
        except KafkaError as exc:
            results.append({"name": topic.name, "error_code": exc.code,
                            "error_message": exc.message or None})
    return {"throttle_time_ms": 0, "results": results}
