"""TransactionMarkerChannel: delivers a transaction's commit or abort marker to the leader of each
of its partitions (WriteTxnMarkers, grouped per broker), retrying until every leader has it —
Kafka's TransactionMarkerChannelManager. How a request reaches a broker is the transport's
business: a direct call in the embedded cluster, a TCP request between processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

from protocol.errors import ErrorCode
from protocol.transaction_records import ControlType

if TYPE_CHECKING:
    from broker.metadata.metadata_cache import MetadataCache

log = structlog.get_logger("kafka_sim.txn_markers")
RETRY_BACKOFF_S = 0.05  # between rounds while some leader has not taken its marker

# Answers after which the marker is retried (to the leader the metadata cache then names); a
# partition whose topic the coordinator's cache no longer has is dropped before the next round.
RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction's marker for some of its partitions."""

    producer_id: int
    producer_epoch: int
    result: ControlType
    coordinator_epoch: int
    partitions: frozenset[tuple[str, int]]

    def to_wire(self) -> dict:
        """The WritableTxnMarker entry of a WriteTxnMarkers request."""
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            topics.setdefault(topic, []).append(partition)
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "transaction_result": self.result == ControlType.COMMIT,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                "coordinator_epoch": self.coordinator_epoch}


class MarkerTransport(Protocol):
    async def write_txn_markers(self, broker_id: int,
                                marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        """The leader's answer per partition; raises ConnectionError when it cannot be reached."""
        ...


def marker_results(markers) -> dict[tuple[str, int], ErrorCode]:
    """A WriteTxnMarkers response's per-partition errors (decoded objects or plain dicts)."""
    def get(obj, name):
        return obj[name] if isinstance(obj, dict) else getattr(obj, name)

    return {(get(t, "name"), get(p, "partition_index")): ErrorCode(get(p, "error_code"))
            for m in markers for t in get(m, "topics") for p in get(t, "partitions")}


class TransactionMarkerChannel:
    def __init__(self, transport: MarkerTransport, cache: MetadataCache) -> None:
        self.transport = transport
        self.cache = cache

    async def send(self, marker: TxnMarker, still_valid: Callable[[], bool]) -> bool:
        """Until every partition's leader has the marker (True), or `still_valid()` turns false
        (this coordinator lost the id: False). A partition whose topic is gone is dropped, as
        Kafka drops it: nobody will read that transaction."""
        pending = set(marker.partitions)
        while still_valid():
            by_broker: dict[int, set[tuple[str, int]]] = {}
            for tp in list(pending):
                if self.cache.topic(tp[0]) is None:
                    pending.discard(tp)
                    continue
                state = self.cache.partition_state(*tp)
                if state is None:
                    pending.discard(tp)
                elif state.leader >= 0:
                    by_broker.setdefault(state.leader, set()).add(tp)
            if not pending:
                return True
            answers = await asyncio.gather(*(
                self._send_to(broker, marker, tps) for broker, tps in by_broker.items()))
            for answer in answers:
                for tp, error in answer.items():
                    if error == ErrorCode.NONE or error not in RETRIABLE:
                        if error != ErrorCode.NONE:
                            log.warning("marker refused", topic=tp[0], partition=tp[1],
                                        producer_id=marker.producer_id, error=error.name)
                        pending.discard(tp)
            if not pending:
                return True
            await asyncio.sleep(RETRY_BACKOFF_S)
        return False

    async def _send_to(self, broker_id: int, marker: TxnMarker,
                       partitions: set[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        subset = TxnMarker(marker.producer_id, marker.producer_epoch, marker.result,
                           marker.coordinator_epoch, frozenset(partitions))
        try:
            return await self.transport.write_txn_markers(broker_id, subset)
        except (ConnectionError, OSError) as exc:
            log.debug("marker not delivered", broker_id=broker_id, reason=str(exc))
            return {}
