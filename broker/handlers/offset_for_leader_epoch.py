"""OffsetForLeaderEpoch (key 23), v2-4: where a leader epoch ends in the leader's log (KIP-101/279).

- Followers ask it after a leader change, to truncate what diverged; consumers ask it to detect
  truncation after a leader change (KIP-320). The answer is the largest epoch <= the requested one
  and the offset where the next epoch starts (the log end offset for the leader's latest epoch);
  an epoch above every known one gets leader_epoch -1, end_offset -1.
- current_leader_epoch fences the asker: newer than the broker's gets UNKNOWN_LEADER_EPOCH, older
  FENCED_LEADER_EPOCH; -1 skips the check. Only the leader answers (NOT_LEADER_OR_FOLLOWER else).
- replica_id (v3+) is read but not used: every asker sees the same answer.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_authorized,
)
from protocol.errors import ErrorCode


@register(23)
async def handle(ctx: RequestContext, request) -> dict:
    rm = ctx.services.replica_manager
    topics = []
    # Followers need CLUSTER_ACTION; consumers (KIP-320, checking for truncation) DESCRIBE.
    described = ({t.topic for t in request.topics} if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
                 else filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, request.topics,
                                        lambda t: t.topic))
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.topic not in described:
                partitions.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   "partition": p.partition, "leader_epoch": -1, "end_offset": -1})
                continue
            found = rm.last_offset_for_leader_epoch(
                topic.topic, p.partition, p.current_leader_epoch, p.leader_epoch
            )
            partitions.append({
                "error_code": found.error,
                "partition": p.partition,
                "leader_epoch": found.leader_epoch,
                "end_offset": found.end_offset,
            })
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
