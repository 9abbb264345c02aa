"""DeleteTopics (key 20), v0-6: delete topics and their data, by name (v0-5) or name/id (v6).

The topic is marked for deletion in the metadata store; the controller stops its replicas and
removes their data; the answer waits (up to timeout_ms) until the metadata no longer has it.

Errors per topic: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID (v6 by id),
TOPIC_DELETION_DISABLED when `delete.topic.enable` is false.
"""

from __future__ import annotations

import uuid

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, authorize
from broker.handlers.metadata import ZERO_UUID
from protocol.errors import ErrorCode, KafkaError


@register(20)
async def handle(ctx: RequestContext, request) -> dict:
    cache = ctx.services.metadata_cache
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    responses = []
    for name, topic_id in wanted:
        try:
            if name is None:
                topic = cache.topic_by_id(uuid.UUID(bytes=topic_id))
                if topic is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
                    # a topic id is not a secret, its name is: the answer leaves it out
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                name = topic.name
            if not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            deleted = await ctx.services.admin_manager.delete_topic(name, request.timeout_ms)
            responses.append({"name": name, "topic_id": deleted.topic_id.bytes,
                              "error_code": ErrorCode.NONE})
        except KafkaError as exc:
            responses.append({"name": name, "topic_id": topic_id, "error_code": exc.code,
                              "error_message": exc.message or None})
    return {"throttle_time_ms": 0, "responses": responses}
