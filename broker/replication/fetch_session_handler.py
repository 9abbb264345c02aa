"""A fetcher's side of a fetch session (Kafka's FetchSessionHandler): which partitions the next
Fetch names, which it forgets, and with which session id and epoch, from the answers so far."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker.replication.delayed_fetch import FetchPartition, FetchPartitionData
from broker.replication.fetch_session import (
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchMetadata,
    PartitionKey,
    next_epoch,
)
from protocol.errors import ErrorCode


@dataclass(slots=True)
class FetchSessionResponse:
    """A Fetch answer as a session sees it: the top-level error, the session id, and the partitions
    it carries (an incremental answer leaves out those with nothing new)."""

    error: ErrorCode
    session_id: int
    partitions: dict[PartitionKey, FetchPartitionData] = field(default_factory=dict)


@dataclass(slots=True)
class FetchRequestData:
    """What the next Fetch sends: its session fields, the partitions it names and those it forgets."""

    metadata: FetchMetadata
    to_send: list[FetchPartition]
    to_forget: list[PartitionKey]


class FetchSessionHandler:
    def __init__(self) -> None:
        self.metadata = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
        # What the leader's session holds for each partition: the request last sent for it.
        self.session_partitions: dict[PartitionKey, FetchPartition] = {}
        # What the last built request sent: all of it (a full request), or its changes
        self._sent_all: dict[PartitionKey, FetchPartition] | None = None
        self._sent: list[FetchPartition] = []
        self._forgot: list[PartitionKey] = []

    def build(self, wanted: list[FetchPartition]) -> FetchRequestData:
        """The next request for `wanted` (every partition to fetch, each as it would be fetched)."""
        pending = {(fp.topic, fp.partition): fp for fp in wanted}
        return self.build_from(
            pending, [*pending, *(k for k in self.session_partitions if k not in pending)])

    def build_from(self, wanted: Mapping[PartitionKey, FetchPartition],
                   changed: Iterable[PartitionKey]) -> FetchRequestData:
        """The next request, from every partition to fetch (`wanted`, each as it would be fetched)
        and the keys whose request may differ from what the session holds (`changed`: those
        added, removed or moved since the last request). An incremental request costs what
        changed; a full one names every partition."""
        if self.metadata.is_full:
            self._sent_all = dict(wanted)
            return FetchRequestData(self.metadata, list(self._sent_all.values()), [])
        self._sent_all, self._sent, self._forgot = None, [], []
        session = self.session_partitions
        for key in changed:
            fp = wanted.get(key)
            if fp is None:
                if key in session:
                    self._forgot.append(key)
            elif session.get(key) != fp:
                self._sent.append(fp)
        return FetchRequestData(self.metadata, self._sent, self._forgot)

    def handle_response(self, response: FetchSessionResponse) -> bool:
        """Take the answer to the last built request; False when it is a session error (the next
        request is then a full one)."""
        if response.error != ErrorCode.NONE:
            if response.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.metadata = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
            else:
                self.handle_error()
            return False
        if self._sent_all is not None:
            self.session_partitions = self._sent_all
        else:
            for fp in self._sent:
                self.session_partitions[(fp.topic, fp.partition)] = fp
            for key in self._forgot:
                self.session_partitions.pop(key, None)
        if response.session_id == INVALID_SESSION_ID:  # no session (cache full) or it was closed
            self.metadata = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
        elif self.metadata.is_full:
            self.metadata = FetchMetadata(response.session_id, next_epoch(INITIAL_EPOCH))
        else:
            self.metadata = FetchMetadata(response.session_id, next_epoch(self.metadata.epoch))
        return True

    def handle_error(self) -> None:
        """The request failed or was abandoned: the leader may or may not have moved the epoch, so
        the next request is full, closing the old session and asking for a new one."""
        self.metadata = FetchMetadata(self.metadata.session_id, INITIAL_EPOCH)
