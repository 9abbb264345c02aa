"""The controller's requests in Kafka's wire form: LeaderAndIsr (v7), UpdateMetadata (v8) and
StopReplica (v4) bodies built from the controller's records, and read back (every version) into
them on the broker. Topic configs are not on the wire: as in Kafka, brokers read them from the
metadata store (broker/metadata/topic_config_cache.py)."""

from __future__ import annotations

import uuid

from broker.metadata.metadata_cache import MetadataSnapshot, TopicInfo
from broker.metadata.partition_state import LeaderAndIsr
from broker.metadata.topic_names import INTERNAL_TOPICS
from protocol.errors import ErrorCode

LEADER_AND_ISR, LEADER_AND_ISR_VERSION = 4, 7
STOP_REPLICA, STOP_REPLICA_VERSION = 5, 4
UPDATE_METADATA, UPDATE_METADATA_VERSION = 6, 8
PLAINTEXT = 0  # security protocol id
NO_TOPIC_ID = bytes(16)


def _partition_state(state: LeaderAndIsr, **extra: object) -> dict:
    return {"partition_index": state.partition, "controller_epoch": state.controller_epoch,
            "leader": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr),
            "replicas": list(state.replicas), **extra}


def _grouped(states: list[LeaderAndIsr]) -> dict[str, list[LeaderAndIsr]]:
    by_topic: dict[str, list[LeaderAndIsr]] = {}
    for state in states:
        by_topic.setdefault(state.topic, []).append(state)
    return by_topic


def leader_and_isr_body(controller_id: int, controller_epoch: int, states: list[LeaderAndIsr],
                        brokers: dict[int, tuple[str, int]]) -> dict:
    leaders = {s.leader for s in states if s.leader >= 0}
    return {
        "controller_id": controller_id, "controller_epoch": controller_epoch, "broker_epoch": -1,
        "type": 0,
        "topic_states": [
            {"topic_name": topic, "topic_id": NO_TOPIC_ID, "partition_states": [
                _partition_state(s, partition_epoch=s.partition_version, adding_replicas=[],
                                 removing_replicas=[], is_new=False, leader_recovery_state=0)
                for s in group]}
            for topic, group in _grouped(states).items()],
        "live_leaders": [{"broker_id": b, "host_name": h, "port": p}
                         for b, (h, p) in sorted(brokers.items()) if b in leaders],
    }


def leader_and_isr_errors(body: dict, response) -> dict[tuple[str, int], ErrorCode]:
    """Per partition, the error a broker answered `body` (v5+) with. Its topics come back in the
    request's order (keyed by topic id, which this controller does not send)."""
    names = [t["topic_name"] for t in body["topic_states"]]
    return {(name, p.partition_index): ErrorCode(p.error_code)
            for name, topic in zip(names, response.topics, strict=False)
            for p in topic.partition_errors}


def _partition_states(request, grouped_from: int, version: int):
    """(topic, partition state) pairs of a LeaderAndIsr/UpdateMetadata request of any version."""
    if version < grouped_from:
        return [(p.topic_name, p) for p in request.ungrouped_partition_states]
    return [(t.topic_name, p) for t in request.topic_states for p in t.partition_states]


def leader_and_isr_states(request, version: int) -> list[LeaderAndIsr]:
    return [LeaderAndIsr(topic, p.partition_index, p.leader, p.leader_epoch, list(p.isr),
                         list(p.replicas), p.partition_epoch, p.controller_epoch)
            for topic, p in _partition_states(request, 2, version)]


def update_metadata_body(snapshot: MetadataSnapshot) -> dict:
    states = _grouped(list(snapshot.partitions.values()))
    return {
        "controller_id": snapshot.controller_id, "controller_epoch": snapshot.controller_epoch,
        "broker_epoch": -1,
        "topic_states": [
            {"topic_name": name, "topic_id": info.topic_id.bytes, "partition_states": [
                _partition_state(s, zk_version=s.partition_version, offline_replicas=list(
                    snapshot.offline_replicas.get((s.topic, s.partition), ())))
                for s in states.get(name, [])]}
            for name, info in snapshot.topics.items()],
        "live_brokers": [
            {"id": b, "endpoints": [
                {"port": p, "host": h, "listener": name, "security_protocol": PLAINTEXT}
                for name, (h, p) in (snapshot.endpoints.get(b) or {"PLAINTEXT": address}).items()],
             "rack": None}
            for b, address in sorted(snapshot.brokers.items())],
    }


def update_metadata_topics(request, version: int) -> list[str]:
    """The topics an UpdateMetadata request describes (those with partition states)."""
    return sorted({topic for topic, _ in _partition_states(request, 5, version)})


def metadata_snapshot(request, version: int, overrides: dict[str, dict[str, str]],
                      inter_broker_listener: str) -> MetadataSnapshot:
    """The snapshot an UpdateMetadata request describes; `overrides`: topics' configs."""
    brokers, endpoints = {}, {}
    for b in request.live_brokers:
        if version == 0:
            endpoints[b.id] = {"PLAINTEXT": (b.v0_host, b.v0_port)}
        else:  # listener names came with v3; before, the one endpoint is PLAINTEXT
            endpoints[b.id] = {(e.get("listener") or "PLAINTEXT"): (e.host, e.port)
                               for e in b.endpoints}
        if endpoints[b.id]:
            brokers[b.id] = endpoints[b.id].get(inter_broker_listener,
                                                next(iter(endpoints[b.id].values())))
    partitions: dict[tuple[str, int], LeaderAndIsr] = {}
    assignments: dict[str, dict[int, list[int]]] = {}
    offline: dict[tuple[str, int], list[int]] = {}
    for topic, p in _partition_states(request, 5, version):
        partitions[(topic, p.partition_index)] = LeaderAndIsr(
            topic, p.partition_index, p.leader, p.leader_epoch, list(p.isr), list(p.replicas),
            p.zk_version, p.controller_epoch)
        if version >= 4 and p.offline_replicas:
            offline[(topic, p.partition_index)] = list(p.offline_replicas)
        assignments.setdefault(topic, {})[p.partition_index] = list(p.replicas)
    ids = {t.topic_name: uuid.UUID(bytes=bytes(t.topic_id)) for t in request.get("topic_states", ())
           if version >= 7}
    topics = {name: TopicInfo(name, ids.get(name, uuid.UUID(int=0)), dict(sorted(parts.items())),
                              overrides.get(name, {}), name in INTERNAL_TOPICS)
              for name, parts in assignments.items()}
    return MetadataSnapshot(request.controller_id, request.controller_epoch, brokers, topics,
                            partitions, endpoints, offline)


def stop_replica_body(controller_id: int, controller_epoch: int, keys: list[tuple[str, int]],
                      delete: bool) -> dict:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in keys:
        by_topic.setdefault(topic, []).append(partition)
    return {
        "controller_id": controller_id, "controller_epoch": controller_epoch, "broker_epoch": -1,
        "topic_states": [
            {"topic_name": topic, "partition_states": [
                {"partition_index": p, "leader_epoch": -2 if delete else -1,
                 "delete_partition": delete} for p in parts]}
            for topic, parts in by_topic.items()],
    }


def stop_replica_errors(response) -> dict[tuple[str, int], ErrorCode]:
    """Per partition, the error a broker answered StopReplica with."""
    return {(p.topic_name, p.partition_index): ErrorCode(p.error_code)
            for p in response.partition_errors}


def stop_replica_partitions(request, version: int) -> tuple[list[tuple[str, int]], bool]:
    """The partitions to stop and whether to delete them (per request here, as the controller
    sends one kind at a time)."""
    if version == 0:
        return ([(p.topic_name, p.partition_index) for p in request.ungrouped_partitions],
                request.delete_partitions)
    if version <= 2:
        return ([(t.name, p) for t in request.topics for p in t.partition_indexes],
                request.delete_partitions)
    keys, delete = [], False
    for t in request.topic_states:
        for p in t.partition_states:
            keys.append((t.topic_name, p.partition_index))
            delete = delete or p.delete_partition
    return keys, delete
