"""TransactionMarkerChannel: delivers a transaction's commit or abort marker to the leader of each
of its partitions, retrying until every leader has it — Kafka's TransactionMarkerChannelManager.
Markers wait in a queue per broker; one sender per broker takes everything queued into one
WriteTxnMarkers request, so transactions ending together share requests. How a request reaches a
broker is the transport's business: a direct call in the embedded cluster, TCP between processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.logs import get_logger
from protocol.errors import ErrorCode
from protocol.transaction_records import ControlType

if TYPE_CHECKING:
    from broker.metadata.metadata_cache import MetadataCache

log = get_logger("kafka_sim.txn_markers")
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


Answers = dict[tuple[str, int], ErrorCode]


class MarkerTransport(Protocol):
    async def write_txn_markers(self, broker_id: int,
                                markers: list[TxnMarker]) -> list[Answers]:
        """One request: the leader's answer per partition of each marker, in order; raises
        ConnectionError when the leader cannot be reached."""
        ...

    async def verify_txn_partitions(self, broker_id: int, transactional_id: str,
                                    producer_id: int, producer_epoch: int,
                                    partitions: set[tuple[str, int]], add: bool = False,
                                    ) -> Answers:
        """The other way (KIP-890): a leader asks coordinator `broker_id` whether these
        partitions are in the producer's ongoing transaction, or (`add`, transactions v2) to add
        them to it; raises ConnectionError when it cannot be reached."""
        ...

    async def share_state(self, broker_id: int, api_key: int, body: dict) -> dict:
        """A share partition's leader reads (ReadShareGroupState) or writes
        (WriteShareGroupState) its state at share coordinator `broker_id`: the response body;
        raises ConnectionError when it cannot be reached."""
        ...


def marker_results(markers) -> list[Answers]:
    """A WriteTxnMarkers response's per-partition errors, per marker in the request's order
    (decoded objects or plain dicts)."""
    def get(obj, name):
        return obj[name] if isinstance(obj, dict) else getattr(obj, name)

    return [{(get(t, "name"), get(p, "partition_index")): ErrorCode(get(p, "error_code"))
             for t in get(m, "topics") for p in get(t, "partitions")} for m in markers]


class TransactionMarkerChannel:
    def __init__(self, transport: MarkerTransport, cache: MetadataCache) -> None:
        self.transport = transport
        self.cache = cache
        self._queues: dict[int, list[tuple[TxnMarker, asyncio.Future]]] = {}
        self._senders: dict[int, asyncio.Task] = {}

    def close(self) -> None:
        for task in self._senders.values():
            task.cancel()
        self._senders.clear()
        for queue in self._queues.values():
            for _, future in queue:
                future.cancel()
        self._queues.clear()

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
                       partitions: set[tuple[str, int]]) -> Answers:
        """Queue the marker for `partitions` on the broker's queue; its answer ({} when the
        broker could not be reached)."""
        subset = TxnMarker(marker.producer_id, marker.producer_epoch, marker.result,
                           marker.coordinator_epoch, frozenset(partitions))
        future = asyncio.get_running_loop().create_future()
        self._queues.setdefault(broker_id, []).append((subset, future))
        sender = self._senders.get(broker_id)
        if sender is None or sender.done():
            self._senders[broker_id] = asyncio.ensure_future(self._drain(broker_id))
        return await future

    async def _drain(self, broker_id: int) -> None:
        """The broker's sender: everything queued goes out in one request, until none is left."""
        while self._queues.get(broker_id):
            batch = self._queues.pop(broker_id)
            try:
                answers = await self.transport.write_txn_markers(broker_id, [m for m, _ in batch])
            except (ConnectionError, OSError) as exc:
                log.debug("markers not delivered", broker_id=broker_id, reason=str(exc))
                answers = [{} for _ in batch]
            except Exception:
                log.exception("markers not delivered", broker_id=broker_id)
                answers = [{} for _ in batch]
            for (_, future), answer in zip(batch, answers, strict=False):
                if not future.done():
                    future.set_result(answer)
            for _, future in batch[len(answers):]:  # a short answer: those go again
                if not future.done():
                    future.set_result({})
