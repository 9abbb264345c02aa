"""DescribeProducers (key 61), v0: a partition leader's active producers (KIP-664), as Kafka's
`kafka-transactions.sh describe-producers` shows them: id, epoch, last sequence and timestamp, the
last marker's coordinator epoch and the open transaction's first offset (-1 when none).

- Only the leader answers (NOT_LEADER_OR_FOLLOWER else); an unknown partition gets
  UNKNOWN_TOPIC_OR_PARTITION; each partition's error is its own.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, ResourceType, filter_authorized
from protocol.errors import ErrorCode, KafkaError


@register(61)
async def handle(ctx: RequestContext, request) -> dict:
    rm = ctx.services.replica_manager
    topics = []
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, request.topics,
                                 lambda t: t.name)
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            answer: dict = {"partition_index": index, "error_code": ErrorCode.NONE,
                            "error_message": None, "active_producers": []}
            if topic.name not in readable:
                answer["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                partitions.append(answer)
                continue
            try:
                partition = rm.leader_partition(topic.name, index)
            except KafkaError as exc:
                answer["error_code"] = exc.code
                partitions.append(answer)
                continue
            answer["active_producers"] = [{
                "producer_id": p["producer_id"], "producer_epoch": p["epoch"],
                "last_sequence": p["last_sequence"], "last_timestamp": p["last_timestamp"],
                "coordinator_epoch": p["coordinator_epoch"],
                "current_txn_start_offset": p["current_txn_start_offset"],
            } for p in partition.log.producer_state.describe()]
            partitions.append(answer)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
