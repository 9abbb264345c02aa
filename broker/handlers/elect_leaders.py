"""ElectLeaders (key 43), v0-2: a PREFERRED election moves leadership to each partition's first
replica, an UNCLEAN one (v1+) gives a leaderless partition a leader, out of the ISR if need be.

As a ZooKeeper-mode Kafka broker: ALTER on the cluster; the controller decides (NOT_CONTROLLER per
partition on any other broker: clients send it to the controller Metadata names); null
topic_partitions means every partition, and then partitions that needed no election are left out
of the answer; the answer waits (up to timeout_ms, REQUEST_TIMED_OUT after) until this broker's
metadata shows the elected leaders, as Kafka's DelayedElectLeader.
"""

from __future__ import annotations

from broker.handlers import RequestContext, register
from broker.handlers.authorization import AclOperation, authorize_cluster
from protocol.errors import ErrorCode, KafkaError

PREFERRED, UNCLEAN = 0, 1


@register(43)
async def handle(ctx: RequestContext, request) -> dict:
    listed = request.topic_partitions
    keys = [] if listed is None else list(dict.fromkeys(
        (t.topic, p) for t in listed for p in t.partitions))
    election_type = request.election_type if ctx.api_version >= 1 else PREFERRED
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return _response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         dict.fromkeys(keys, KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)))
    if election_type not in (PREFERRED, UNCLEAN):  # Kafka's ElectionType.valueOf throws
        error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                           f"Expected a value of 0 or 1, but got {election_type}")
        return _response(ErrorCode.UNKNOWN_SERVER_ERROR, dict.fromkeys(keys, error))
    cache = ctx.services.metadata_cache
    if listed is None:
        keys = [(name, p) for name, info in sorted(cache.topics.items()) for p in info.assignment]
    try:
        outcome = await ctx.services.controller_requests.elect_leaders(
            keys, unclean=election_type == UNCLEAN)
    except KafkaError as exc:  # not the controller (or no longer): every partition says so
        outcome = dict.fromkeys(keys, KafkaError(exc.code))
    elected = {key: leader for key, leader in outcome.items() if isinstance(leader, int)}
    if elected:
        def shown(snapshot) -> bool:
            return all((s := snapshot.partitions.get(k)) is not None and s.leader == leader
                       for k, leader in elected.items())

        await cache.wait_for(shown, request.timeout_ms)
    results: dict[tuple[str, int], KafkaError | None] = {}
    for key in keys:
        result = outcome.get(key)
        if isinstance(result, int):
            state = cache.partition_state(*key)
            results[key] = None if state is not None and state.leader == result else KafkaError(
                ErrorCode.REQUEST_TIMED_OUT)
        else:
            results[key] = result
    if listed is None:
        results = {k: e for k, e in results.items()
                   if e is None or e.code != ErrorCode.ELECTION_NOT_NEEDED}
    return _response(ErrorCode.NONE, results)


def _response(error_code: ErrorCode, results: dict[tuple[str, int], KafkaError | None]) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), error in results.items():
        by_topic.setdefault(topic, []).append({
            "partition_id": partition,
            "error_code": ErrorCode.NONE if error is None else error.code,
            "error_message": None if error is None else error.message or _default_message(error.code)})
    return {"throttle_time_ms": 0, "error_code": error_code, "replica_election_results": [
        {"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()]}


def _default_message(code: ErrorCode) -> str | None:
    # Kafka's ApiError of a bare ELECTION_NOT_NEEDED carries the code's message; the other bare
    # codes here (NOT_CONTROLLER, REQUEST_TIMED_OUT, CLUSTER_AUTHORIZATION_FAILED) none.
    return "Leader election not needed for topic partition." \
        if code == ErrorCode.ELECTION_NOT_NEEDED else None
