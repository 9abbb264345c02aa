"""Fault injection for the control API: rules that make one broker fail chosen requests on purpose.

Pure logic, no I/O: the connection asks `match()` before handling a request and acts on the answer.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol import API_NAMES, api_name
from protocol.errors import ErrorCode

ZERO_UUID = bytes(16)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
API_VERSIONS_KEY = 18
# What a broker answering UNSUPPORTED_VERSION to ApiVersions advertises, so the client can retry.
API_VERSIONS_RANGE = {"api_key": API_VERSIONS_KEY, "min_version": 0, "max_version": 4}


class FaultAction(enum.StrEnum):
    ERROR = "error"  # answer with a Kafka error code instead of processing
    DROP_RESPONSE = "drop_response"  # process, then close the connection without answering
    DISCONNECT = "disconnect"  # close the connection without processing
    DELAY = "delay_ms"  # wait delay_ms, then process normally


@dataclass(slots=True)
class Fault:
    """One injected fault: what a broker does to requests of an API (and partition) it matches."""
    id: int
    broker_id: int
    api_key: int
    partition: tuple[str, int] | None
    action: FaultAction
    error_code: int | None = None
    delay_ms: int | None = None
    remaining: int | None = None  # None: until cleared
    hits: int = 0

    @property
    def api(self) -> str:
        return api_name(self.api_key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as the control API lists it."""
        return {
            "id": self.id,
            "broker": self.broker_id,
            "api": self.api,
            "api_key": self.api_key,
            "partition": f"{self.partition[0]}:{self.partition[1]}" if self.partition else None,
            "action": self.action.value,
            "error": self.error_code,
            "error_name": _error_name(self.error_code) if self.error_code is not None else None,
            "delay_ms": self.delay_ms,
            "remaining": self.remaining,
            "hits": self.hits,
        }


# Where each partition-addressed request names its partitions: api key -> (topic, partition) pairs.
# Fetch v13+ names topics by id only: its partitions are matched by name through `also_touches`.
PartitionsOf = Callable[[Any], Iterable[tuple[str, int]]]
REQUEST_PARTITIONS: dict[int, PartitionsOf] = {
    0: lambda r: ((t.name, p.index) for t in r.topic_data for p in t.partition_data),
    1: lambda r: ((t.get("topic"), p.partition) for t in r.topics for p in t.partitions),
    2: lambda r: ((t.name, p.partition_index) for t in r.topics for p in t.partitions),
    23: lambda r: ((t.topic, p.partition) for t in r.topics for p in t.partitions),
}


class FaultInjector:
    """The active faults of a cluster, shared by all its brokers (each fault names one broker)."""

    def __init__(self) -> None:
        self._faults: dict[int, Fault] = {}
        self._ids = itertools.count(1)

    def add(
        self,
        broker_id: int,
        api: str | int,
        *,
        partition: tuple[str, int] | str | None = None,
        error: int | str | None = None,
        drop_response: bool = False,
        disconnect: bool = False,
        delay_ms: int | None = None,
        count: int | None = None,
    ) -> Fault:
        """Add a fault with exactly one action; ValueError names what is wrong with the spec."""
        if not _is_int(broker_id):
            raise ValueError(f"broker must be an integer id, not {broker_id!r}")
        api_key = resolve_api(api)
        chosen = [name for name, on in (("error", error is not None),
                                        ("drop_response", bool(drop_response)),
                                        ("disconnect", bool(disconnect)),
                                        ("delay_ms", delay_ms is not None)) if on]
        if len(chosen) != 1:
            raise ValueError("a fault needs exactly one of error, drop_response, disconnect, "
                             f"delay_ms (got {', '.join(chosen) or 'none'})")
        action = FaultAction(chosen[0])
        error_code = None
        if action is FaultAction.ERROR:
            error_code = resolve_error(error)
            if api_key not in ERROR_RESPONSES:
                raise ValueError(f"no error response is known for {api_name(api_key)}; "
                                 "use drop_response, disconnect or delay_ms")
        if action is FaultAction.DELAY and (not _is_int(delay_ms) or delay_ms < 0):
            raise ValueError(f"delay_ms must be a non-negative integer, not {delay_ms!r}")
        if count is not None and (not _is_int(count) or count < 1):
            raise ValueError(f"count must be a positive integer or null, not {count!r}")
        where = parse_partition(partition) if partition is not None else None
        if where is not None and api_key not in REQUEST_PARTITIONS:
            raise ValueError(f"{api_name(api_key)} requests do not address partitions; "
                             "drop the partition")
        fault = Fault(next(self._ids), broker_id, api_key, where, action, error_code,
                      delay_ms if action is FaultAction.DELAY else None, count)
        self._faults[fault.id] = fault
        return fault

    def list(self) -> list[Fault]:
        return list(self._faults.values())

    def clear(self, fault_id: int | None = None, broker_id: int | None = None) -> int:
        """Remove the faults matching both filters (no filter: all of them); returns how many."""
        gone = [f.id for f in self._faults.values()
                if (fault_id is None or f.id == fault_id)
                and (broker_id is None or f.broker_id == broker_id)]
        for fid in gone:
            del self._faults[fid]
        return len(gone)

    def match(self, broker_id: int, api_key: int, request: Mapping[str, Any], *,
              also_touches: Callable[[], Iterable[tuple[str, int]]] | None = None,
              ) -> Fault | None:
        """The oldest fault that applies to this request, with one use consumed; None if none.

        A fault with a partition applies only to requests that touch that partition: those the
        request names, and `also_touches()` (an incremental Fetch reads its session's partitions
        without naming them).
        """
        if not self._faults:  # the common case costs one check
            return None
        for fault in self._faults.values():
            if fault.broker_id != broker_id or fault.api_key != api_key:
                continue
            if fault.partition is not None and fault.partition not in set(
                REQUEST_PARTITIONS[api_key](request)
            ) and (also_touches is None or fault.partition not in set(also_touches())):
                continue
            fault.hits += 1
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    del self._faults[fault.id]
            return fault
        return None


def resolve_api(api: str | int) -> int:
    """An API key from a key, a numeric string or a name in any case ("Produce", "produce",
    "api_versions", "ApiVersions")."""
    if _is_int(api) or (isinstance(api, str) and api.strip().isdigit()):
        key = int(api)
        if key in API_NAMES:
            return key
        raise ValueError(f"unknown API key {key}")
    if isinstance(api, str):
        key = _API_BY_NAME.get(_squash(api))
        if key is not None:
            return key
    raise ValueError(f"unknown API {api!r} (names as in Kafka, e.g. Produce, Fetch, Metadata)")


def resolve_error(error: int | str | None) -> int:
    """An error code from a code, a numeric string or a name ("NOT_LEADER_OR_FOLLOWER")."""
    text = error.strip() if isinstance(error, str) else None
    if text is not None and text.lstrip("-").isdigit():
        error = int(text)
    if _is_int(error):
        if error not in _CODES:
            raise ValueError(f"unknown error code {error}")
        code = error
    elif text is not None and text.upper() in ErrorCode.__members__:
        code = int(ErrorCode[text.upper()])
    else:
        raise ValueError(f"unknown error {error!r} (a Kafka error code or name, "
                         "e.g. 6 or NOT_LEADER_OR_FOLLOWER)")
    if code == ErrorCode.NONE:
        raise ValueError("error 0 (NONE) is not an error")
    return code


def parse_partition(partition: tuple[str, int] | list | str) -> tuple[str, int]:
    """(topic, partition) from a pair or "topic:partition"."""
    if isinstance(partition, str):
        topic, sep, index = partition.rpartition(":")
        if not sep or not topic or not index.isdigit():
            raise ValueError(f"partition must look like TOPIC:N, not {partition!r}")
        return topic, int(index)
    if (isinstance(partition, tuple | list) and len(partition) == 2
            and isinstance(partition[0], str) and partition[0] and _is_int(partition[1])
            and partition[1] >= 0):
        return partition[0], partition[1]
    raise ValueError(f"partition must be TOPIC:N or (topic, n), not {partition!r}")


def error_response(api_key: int, api_version: int, request: Mapping[str, Any], code: int) -> dict:
    """The response body a broker sends when this whole request fails with `code`.

    Every topic/partition of the request carries the code. Metadata answers leave `brokers`
    empty, `cluster_id` None and `controller_id` -1 for the caller to fill in, and a request for
    all topics (null/empty list) gets no topic entries. Produce with acks=0 has no response on
    the wire: Kafka closes the connection instead, and so should the caller.
    """
    build = ERROR_RESPONSES.get(api_key)
    if build is None:
        raise ValueError(f"no error response is known for {api_name(api_key)}")
    return build(request, api_version, code)


def _produce(r, v: int, code: int) -> dict:
    return {"throttle_time_ms": 0, "responses": [
        {"name": t.name, "partition_responses": [
            {"index": p.index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
             "log_start_offset": -1, "record_errors": [], "error_message": None}
            for p in t.partition_data]}
        for t in r.topic_data]}


def _fetch(r, v: int, code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": [
        {"topic": t.get("topic", ""), "topic_id": t.get("topic_id", ZERO_UUID), "partitions": [
            {"partition_index": p.partition, "error_code": code, "high_watermark": -1,
             "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": [],
             "preferred_read_replica": -1, "records": b""}
            for p in t.partitions]}
        for t in r.topics]}


def _list_offsets(r, v: int, code: int) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code, "old_style_offsets": [],
             "timestamp": -1, "offset": -1, "leader_epoch": -1}
            for p in t.partitions]}
        for t in r.topics]}


def _metadata(r, v: int, code: int) -> dict:
    return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED, "topics": [
                {"error_code": code, "name": t.name, "topic_id": t.get("topic_id", ZERO_UUID),
                 "is_internal": False, "partitions": [],
                 "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
                for t in (r.topics or ())]}


def _create_topics(r, v: int, code: int) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "topic_id": ZERO_UUID, "error_code": code,
         "error_message": _error_name(code), "num_partitions": -1, "replication_factor": -1,
         "configs": None}
        for t in r.topics]}


def _delete_topics(r, v: int, code: int) -> dict:
    wanted = ([(t.name, t.topic_id) for t in r.topics] if v >= 6
              else [(name, ZERO_UUID) for name in r.topic_names])
    return {"throttle_time_ms": 0, "responses": [
        {"name": name, "topic_id": topic_id, "error_code": code,
         "error_message": _error_name(code)}
        for name, topic_id in wanted]}


def _init_producer_id(r, v: int, code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


def _describe_configs(r, v: int, code: int) -> dict:
    return {"throttle_time_ms": 0, "results": [
        {"error_code": code, "error_message": _error_name(code),
         "resource_type": res.resource_type, "resource_name": res.resource_name, "configs": []}
        for res in r.resources]}


def _offset_for_leader_epoch(r, v: int, code: int) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"topic": t.topic, "partitions": [
            {"error_code": code, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            for p in t.partitions]}
        for t in r.topics]}


def _api_versions(r, v: int, code: int) -> dict:
    keys = [API_VERSIONS_RANGE] if code == ErrorCode.UNSUPPORTED_VERSION else []
    return {"error_code": code, "api_keys": keys, "throttle_time_ms": 0}


ErrorBuilder = Callable[[Any, int, int], dict]
ERROR_RESPONSES: dict[int, ErrorBuilder] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    18: _api_versions,
    19: _create_topics,
    20: _delete_topics,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    32: _describe_configs,
}

_CODES = frozenset(int(c) for c in ErrorCode)


def _squash(name: str) -> str:
    return name.strip().lower().replace("_", "").replace("-", "")


_API_BY_NAME = {_squash(name): key for key, name in API_NAMES.items()}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _error_name(code: int) -> str:
    return ErrorCode(code).name if code in _CODES else f"ERROR_{code}"
