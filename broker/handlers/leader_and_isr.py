"""LeaderAndIsr (key 4), v0-7: the controller tells this broker which partitions it leads or
follows, with leader epochs and ISRs (inter-broker; a ZooKeeper-mode Kafka 3.9 broker serves it).

- A controller epoch older than the latest this broker has seen gets STALE_CONTROLLER_EPOCH for
  the whole request; otherwise each partition gets its own error (e.g. a stale leader epoch).
- Topic configs come from the metadata store (read once per topic, then kept current by
  /config/changes notifications), as in Kafka, over this broker's dynamic log settings; topic
  ids are not used.
"""

from __future__ import annotations

from broker.controller.wire import leader_and_isr_states
from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, require_cluster
from protocol.errors import ErrorCode, KafkaError


@register(4)
async def handle(ctx: RequestContext, request) -> dict:
    version = ctx.api_version
    target = ctx.services.controller_requests
    states = leader_and_isr_states(request, version)
    try:
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
        overrides = await target.topic_config_overrides(sorted({s.topic for s in states}))
        configs = {t: target.log_config_for(o) for t, o in overrides.items()}
        errors = await target.apply_leader_and_isr(request.controller_epoch, states, configs)
    except KafkaError as exc:
        return {"error_code": exc.code, "partition_errors": [], "topics": []}
    entries = [{"topic_name": s.topic, "partition_index": s.partition,
                "error_code": errors.get((s.topic, s.partition), ErrorCode.NONE)} for s in states]
    if version < 5:
        return {"error_code": ErrorCode.NONE, "partition_errors": entries}
    by_topic: dict[str, list[dict]] = {}
    for entry in entries:
        by_topic.setdefault(entry["topic_name"], []).append(entry)
    return {"error_code": ErrorCode.NONE, "topics": [
        {"topic_id": bytes(16), "partition_errors": group} for group in by_topic.values()]}
