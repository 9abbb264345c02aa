"""WriteTxnMarkers (key 27), v0-1: a transaction coordinator tells this broker, as leader of some
of the transaction's partitions, to end it there with a commit or abort marker.

- Each partition gets one control batch (`marker_batch`: the producer's id and epoch, the
  coordinator epoch), appended as the coordinator's own write with acks=-1; the answer is per
  partition (NOT_LEADER_OR_FOLLOWER sends the coordinator to the new leader, UNKNOWN_TOPIC_OR_PARTITION
  makes it drop the partition).
- On a `__consumer_offsets` partition the group coordinator then applies (commit) or drops
  (abort) the offsets the producer committed in the transaction (TxnOffsetCommit).
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from broker.handlers.services import BrokerServices
from broker.metadata.topic_names import OFFSETS_TOPIC
from protocol.errors import ErrorCode
from protocol.transaction_records import ControlType, marker_batch
from storage.append_origin import AppendOrigin

MARKER_TIMEOUT_MS = 30000  # Kafka's request.timeout.ms for the marker's replication


def _get(obj, name: str):
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


async def write_txn_markers(services: BrokerServices, markers) -> list[dict]:
    """The leader's side for every marker of a request (decoded entries or plain dicts, so the
    embedded cluster's coordinators call it directly); the response's `markers`."""
    answers = []
    for marker in markers:
        producer_id, epoch = _get(marker, "producer_id"), _get(marker, "producer_epoch")
        commit = bool(_get(marker, "transaction_result"))
        batch = marker_batch(producer_id, epoch, ControlType.COMMIT if commit else ControlType.ABORT,
                             _get(marker, "coordinator_epoch"))
        keys = [(_get(t, "name"), p) for t in _get(marker, "topics")
                for p in _get(t, "partition_indexes")]
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in keys
                  if services.metadata_cache.partition_state(*tp) is None}
        entries = {tp: batch for tp in keys if tp not in errors}
        if entries:
            results = await services.replica_manager.produce(-1, MARKER_TIMEOUT_MS, entries,
                                                             origin=AppendOrigin.COORDINATOR)
            errors.update({tp: r.error for tp, r in results.items()})
        for (topic, partition), error in errors.items():
            if topic == OFFSETS_TOPIC and error == ErrorCode.NONE:
                services.group_coordinator.complete_txn_offsets(partition, producer_id, commit)
        by_topic: dict[str, list[dict]] = {}
        for topic, partition in keys:
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "error_code": errors[(topic, partition)]})
        answers.append({"producer_id": producer_id, "topics": [
            {"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    return answers


@register(27)
async def handle(ctx: RequestContext, request) -> dict:
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return {"markers": [{"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                for p in t.partition_indexes]} for t in m.topics]} for m in request.markers]}
    return {"markers": await write_txn_markers(ctx.services, request.markers)}
