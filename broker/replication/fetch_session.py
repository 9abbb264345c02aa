"""Fetch sessions (KIP-227), the leader's side: the per-broker FetchSessionCache and the FetchManager
that turns a Fetch's session id and epoch into a full, incremental, sessionless or erred context.

A full fetch (epoch 0) names every partition and, when the cache has a slot, opens a session that
remembers them with what each was last answered (high watermark, last stable offset, log start).
An incremental fetch (the session's id and current epoch) names only partitions whose fetch
position changed and `forgotten` ones to drop, and is answered only those with records, a moved
offset or an error. A session reads only what can have something to say: the partitions named,
those that changed since its last read (`ChangedPartitions`), and those that last had records left
or an error; so an idle partition costs nothing at all (a follower at the leader's log end offset
stays in the ISR without being read, as Kafka's isCaughtUp). Epoch -1 closes a session.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.replication.delayed_fetch import FetchPartition, FetchPartitionData
from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch: open a session (closing the one named, if any)
FINAL_EPOCH = -1  # a full fetch without a session: close the one named, open none
# Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: how long a session is safe from eviction by a
# bigger or privileged newcomer, and how long unused before anyone may take its slot.
EVICTION_MS = 120_000
# Partitions all sessions may hold together (~300 B each): a full fetch naming a million made-up
# partitions must not become a million cached entries, nor a thousand such sessions a thousand
# times that. Kafka has no such bound; beyond it a fetch goes on sessionless (session id 0), which
# every client handles, and a session an incremental fetch would grow past it is closed.
MAX_CACHED_PARTITIONS = 200_000
# Changes remembered for sessions (one entry per partition, the newest change): beyond it the
# oldest are dropped, and a session last read before them reads all its partitions once.
MAX_TRACKED_CHANGES = 100_000

# (topic name or, for a session opened by Fetch v13+, topic id; partition): Kafka keys a
# session's partitions by TopicIdPartition.
PartitionKey = tuple[str | uuid.UUID, int]
# A partition's fixed fields in a Fetch response (index, error, offsets, the aborted
# transactions' and records' lengths, preferred read replica): what it costs with no records
PARTITION_RESPONSE_OVERHEAD = 42


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: FINAL stays FINAL, the largest int wraps to 1 (0 means full)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


@dataclass(slots=True, frozen=True)
class FetchMetadata:
    """A Fetch request's session_id and session_epoch."""

    session_id: int = INVALID_SESSION_ID
    epoch: int = FINAL_EPOCH  # what a Fetch below v7 (no session fields) means

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: the fetcher's last request for it and what it was last told."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    fetcher_log_start_offset: int
    topic_id: uuid.UUID | None = None
    high_watermark: int = -1  # -1: never answered (or last answered with an error): answer next
    last_stable_offset: int = -1
    log_start_offset: int = -1
    order: int = 0  # its place in the session's read order (moved last when it got records)

    @classmethod
    def of(cls, fp: FetchPartition) -> CachedPartition:
        return cls(fp.topic, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                   fp.current_leader_epoch, fp.log_start_offset, fp.topic_id)

    def update_request(self, fp: FetchPartition) -> None:
        self.fetch_offset = fp.fetch_offset
        self.max_bytes = fp.partition_max_bytes
        self.leader_epoch = fp.current_leader_epoch
        self.fetcher_log_start_offset = fp.log_start_offset

    def as_fetch_partition(self) -> FetchPartition:
        return FetchPartition(self.topic, self.partition, self.fetch_offset, self.max_bytes,
                              self.leader_epoch, self.fetcher_log_start_offset, self.topic_id)

    def must_respond(self, data: FetchPartitionData, *, remember: bool) -> bool:
        """Whether an incremental response must carry this partition (Kafka's
        maybeUpdateResponseData); with `remember`, what it says becomes what was last told."""
        respond = bool(data.records)
        if data.high_watermark != self.high_watermark:
            respond = True
        if data.last_stable_offset != self.last_stable_offset:
            respond = True
        if data.log_start_offset != self.log_start_offset:
            respond = True
        if data.error != ErrorCode.NONE:
            respond = True
        if remember:
            # After an error the HW is forgotten, so the partition is answered again once it clears.
            self.high_watermark = -1 if data.error != ErrorCode.NONE else data.high_watermark
            self.last_stable_offset = data.last_stable_offset
            self.log_start_offset = data.log_start_offset
        return respond


class ChangedPartitions:
    """The broker's partitions in the order they last changed, each with the sequence number of that
    change: records appended, high watermark, log start or leadership moved, truncated, removed.
    `since(seq)` costs the number of partitions changed since, whatever the number hosted."""

    def __init__(self, max_entries: int = MAX_TRACKED_CHANGES) -> None:
        self.seq = 0
        self.floor = 0  # changes at or below it may have been dropped
        self.max_entries = max_entries
        self._last: OrderedDict[tuple[str, int], int] = OrderedDict()

    def mark(self, key: tuple[str, int]) -> None:
        self.seq += 1
        self._last[key] = self.seq
        self._last.move_to_end(key)
        if len(self._last) > self.max_entries:
            _, self.floor = self._last.popitem(last=False)

    def since(self, seq: int) -> list[tuple[str, int]]:
        """The partitions changed after `seq`, newest first."""
        changed = []
        for key in reversed(self._last):
            if self._last[key] <= seq:
                break
            changed.append(key)
        return changed


@dataclass(slots=True, frozen=True)
class SessionWatch:
    """The one purgatory key a narrowed incremental fetch parks under: its session's (the
    partitions' own keys are (topic, partition) tuples, never equal to it). A change to any of
    the session's partitions checks it (FetchSessionCache.sessions_of), so parking costs the
    same for a session of ten thousand partitions as for one of ten."""
    session_id: int


@dataclass(slots=True, eq=False)
class FetchSession:
    """An incremental fetch session (KIP-227): its partitions and epoch."""
    id: int
    privileged: bool  # a follower's: may evict consumers' sessions
    partitions: OrderedDict[PartitionKey, CachedPartition]
    creation_ms: int
    last_used_ms: int
    uses_topic_ids: bool = False  # opened by Fetch v13+: its requests must keep using ids
    epoch: int = next_epoch(INITIAL_EPOCH)
    cached_size: int = -1  # the size at the last touch: the cache's count and eviction key
    evictable_by_privileged: bool = False
    evictable_by_all: bool = False
    # For reading only what changed: the ChangedPartitions sequence number before the last read
    # (-1: read everything next), partitions last left with records to read or an error, the
    # next `order`, and, for a session by topic ids, each partition's key by topic name.
    seen_seq: int = -1
    pending: set[PartitionKey] = field(default_factory=set)
    next_order: int = 0
    by_name: dict[tuple[str, int], PartitionKey] | None = None
    # The cache's index of sessions by partition name, kept as partitions come and go
    sessions_of: dict[tuple[str, int], set[int]] = field(default_factory=dict)

    @property
    def evictable_key(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey order: consumers' before followers', small before big."""
        return (self.privileged, self.cached_size, self.id)

    def update(self, partitions: Iterable[FetchPartition], forgotten: Iterable[PartitionKey]) -> None:
        """An incremental request's changes: new or moved partitions, then the forgotten ones."""
        for fp in partitions:
            cached = self.partitions.get(fp.key)
            if cached is None:
                self.partitions[fp.key] = cached = CachedPartition.of(fp)
                self.place_last(cached)
                if self.by_name is not None:
                    self.by_name[(fp.topic, fp.partition)] = fp.key
                self.sessions_of.setdefault((fp.topic, fp.partition), set()).add(self.id)
            else:
                cached.update_request(fp)
        for key in forgotten:
            gone = self.partitions.pop(key, None)
            self.pending.discard(key)
            if gone is not None:
                if self.by_name is not None:
                    self.by_name.pop((gone.topic, gone.partition), None)
                self.unindex(gone)

    def unindex(self, cached: CachedPartition) -> None:
        name = (cached.topic, cached.partition)
        ids = self.sessions_of.get(name)
        if ids is not None:
            ids.discard(self.id)
            if not ids:
                del self.sessions_of[name]

    def place_last(self, cached: CachedPartition) -> None:
        cached.order = self.next_order
        self.next_order += 1

    def index_names(self) -> None:
        """A session by topic ids learns its partitions' names (changes are tracked by name)."""
        if self.uses_topic_ids:
            self.by_name = {(c.topic, c.partition): key for key, c in self.partitions.items()}

    def changed_partitions(self, requested: Iterable[FetchPartition],
                           changes: ChangedPartitions) -> list[CachedPartition] | None:
        """What this fetch must read, in session order: the partitions it names, those changed
        since the last read and those pending; None when that is (nearly) all of them anyway."""
        if self.seen_seq < changes.floor:
            return None
        keys = {fp.key for fp in requested} | self.pending
        for name_key in changes.since(self.seen_seq):
            key = name_key if self.by_name is None else self.by_name.get(name_key)
            if key is not None:
                keys.add(key)
        if 2 * len(keys) >= len(self.partitions):
            return None
        found = [c for k in keys if (c := self.partitions.get(k)) is not None]
        found.sort(key=lambda c: c.order)
        return found

    def remember_read(self, pairs: Iterable[tuple[FetchPartition, FetchPartitionData]],
                      seq: int) -> None:
        """After answering: which of the partitions read still have something to say."""
        for fp, data in pairs:
            if data.error != ErrorCode.NONE or fp.fetch_offset < data.end_offset:
                self.pending.add(fp.key)
            else:
                self.pending.discard(fp.key)
        self.seen_seq = seq


class FetchSessionCache:
    """The broker's sessions, at most `max_entries` (`max.incremental.fetch.session.cache.slots`).

    A new session takes a free slot, else (Kafka's tryEvict) the least recently used session's if
    unused for EVICTION_MS, else the smallest evictable one's when the newcomer ranks at least as
    high: a follower's session may evict any consumer's; a session younger than EVICTION_MS is
    evictable only by a follower's, and a follower's only once that old."""

    def __init__(self, max_entries: int, now_ms: Callable[[], int], *,
                 eviction_ms: int = EVICTION_MS, rng: random.Random | None = None,
                 max_partitions: int = MAX_CACHED_PARTITIONS) -> None:
        self.max_entries = max_entries
        self.max_partitions = max_partitions
        self.eviction_ms = eviction_ms
        self._now_ms = now_ms
        # Seeded from the module's generator, not the OS: random as ever in a broker, and the
        # same ids under `kafka-sim simulate`, which seeds that generator (the order sessions
        # are woken in follows their ids).
        self._rng = rng or random.Random(random.getrandbits(64))
        self.sessions: dict[int, FetchSession] = {}
        # partition (topic, index) -> the sessions holding it: what a change to it wakes
        self.sessions_of: dict[tuple[str, int], set[int]] = {}
        self._last_used: OrderedDict[int, FetchSession] = OrderedDict()  # least recent first
        self.num_partitions = 0
        self.evictions = 0

    def now_ms(self) -> int:
        return self._now_ms()

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._last_used.pop(session_id, None)
            self.num_partitions -= max(session.cached_size, 0)
            for cached in session.partitions.values():
                session.unindex(cached)
        return session

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark it used now, recount its size and decide whom it may be evicted by."""
        session.last_used_ms = now
        self._last_used[session.id] = session
        self._last_used.move_to_end(session.id)
        self.num_partitions += len(session.partitions) - max(session.cached_size, 0)
        session.cached_size = len(session.partitions)
        old = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old

    def maybe_create_session(self, privileged: bool,
                             partitions: OrderedDict[PartitionKey, CachedPartition],
                             uses_topic_ids: bool = False) -> int:
        """A new session's id, or INVALID_SESSION_ID when no slot is free or can be taken."""
        now = self.now_ms()
        if self.num_partitions + len(partitions) > self.max_partitions:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_entries and not self._try_evict(
                privileged, (privileged, len(partitions), 0), now):
            return INVALID_SESSION_ID
        session_id = self._new_session_id()
        session = FetchSession(session_id, privileged, partitions, now, now, uses_topic_ids,
                               sessions_of=self.sessions_of)
        for cached in partitions.values():
            self.sessions_of.setdefault((cached.topic, cached.partition), set()).add(session_id)
        self.sessions[session_id] = session
        self.touch(session, now)
        return session_id

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, 2**31 - 1)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        if self.max_entries <= 0 or not self._last_used:
            return False
        oldest = next(iter(self._last_used.values()))
        if now - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest)
            return True
        # A linear scan: it runs only when the cache is full, over at most max_entries sessions.
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: s.evictable_key)
        if key < victim.evictable_key:
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self.evictions += 1

    def stats(self) -> dict:
        return {"sessions": len(self.sessions),
                "privileged": sum(1 for s in self.sessions.values() if s.privileged),
                "partitions": self.num_partitions, "evictions": self.evictions,
                "slots": self.max_entries}


# -- contexts: what one Fetch reads and how its answer is cut --------------------------------


@dataclass(slots=True)
class FetchContext:
    """One Fetch's session handling: `partitions` is what to read; `respond` picks what to answer.

    `kind` is full, incremental, sessionless or error (then `error` is the top-level error and
    nothing is read)."""

    kind: str
    partitions: list[FetchPartition]
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    _cache: FetchSessionCache | None = None
    _privileged: bool = False
    _uses_topic_ids: bool = False
    session_id: int = field(default=INVALID_SESSION_ID)
    # An incremental fetch whose `partitions` are only those that can have something to say
    # (FetchSession.changed_partitions); `widen` makes them all of the session's again.
    narrowed: bool = False
    seq: int = 0  # ChangedPartitions' sequence number when the context was made (before reading)

    def renarrow(self, changes: ChangedPartitions) -> list[FetchPartition]:
        """A narrowed fetch woken from its wait: what it read first and what changed since, in
        session order, becomes what it reads (its cost follows the changes, not the session)."""
        session = self.session
        assert session is not None and self.narrowed
        keys = {fp.key for fp in self.partitions}
        for name_key in changes.since(self.seq):
            key = name_key if session.by_name is None else session.by_name.get(name_key)
            if key is not None:
                keys.add(key)
        found = [c for k in keys if (c := session.partitions.get(k)) is not None]
        found.sort(key=lambda c: c.order)
        self.partitions = [c.as_fetch_partition() for c in found]
        self.seq = changes.seq
        return self.partitions

    def session_watch(self) -> SessionWatch:
        """What a narrowed fetch's wait watches: any change to a partition of its session."""
        assert self.session is not None
        return SessionWatch(self.session.id)

    def changed_since_read(self, changes: ChangedPartitions) -> list[FetchPartition]:
        """The session's partitions changed since this fetch read (what may wake it)."""
        session = self.session
        assert session is not None
        out = []
        for name_key in changes.since(self.seq):
            key = name_key if session.by_name is None else session.by_name.get(name_key)
            cached = session.partitions.get(key) if key is not None else None
            if cached is not None:
                out.append(cached.as_fetch_partition())
        return out

    def widen(self) -> list[FetchPartition]:
        """Every partition of the session (for an authorizer's check or a parked wait)."""
        if self.narrowed and self.session is not None:
            self.partitions = [p.as_fetch_partition() for p in self.session.partitions.values()]
            self.narrowed = False
        return self.partitions

    def response_size(self, results: list[FetchPartitionData]) -> int:
        """What the response would carry, in bytes (its records and each partition's fixed
        fields), the session left as it is (Kafka's getResponseSize, for the fetch quota)."""
        if self.kind == "incremental" and self.session is not None:
            parts = self.session.partitions
            results = [data for fp, data in zip(self.partitions, results, strict=True)
                       if (part := parts.get(fp.key)) is not None
                       and part.must_respond(data, remember=False)]
        return sum(PARTITION_RESPONSE_OVERHEAD + len(data.records) for data in results)

    def respond(self, results: list[FetchPartitionData]
                ) -> list[tuple[FetchPartition, FetchPartitionData]]:
        """The partitions the response carries, in order; sets `session_id` for the response."""
        pairs = list(zip(self.partitions, results, strict=True))
        if self.kind == "full" and self._cache is not None:
            cached: OrderedDict[PartitionKey, CachedPartition] = OrderedDict()
            for order, (fp, data) in enumerate(pairs):
                part = CachedPartition.of(fp)
                part.must_respond(data, remember=True)
                part.order = order
                cached[fp.key] = part
            self.session_id = self._cache.maybe_create_session(self._privileged, cached,
                                                               self._uses_topic_ids)
            session = self._cache.get(self.session_id)
            if session is not None:
                session.next_order = len(cached)
                session.index_names()
                session.remember_read(pairs, self.seq)
            return pairs
        if self.kind == "incremental" and self.session is not None:
            session = self.session
            self.session_id = session.id
            answered = []
            for fp, data in pairs:
                key = fp.key
                part = session.partitions.get(key)
                if part is None:  # forgotten by a later request meanwhile: nothing to say
                    continue
                if part.must_respond(data, remember=True):
                    answered.append((fp, data))
                    if data.records:  # fairness: who got data reads last next time
                        session.partitions.move_to_end(key)
                        session.place_last(part)
            session.remember_read(pairs, self.seq)
            return answered
        return pairs


class FetchManager:
    """Kafka's FetchManager: the broker's session cache and the rules that pick a context."""

    def __init__(self, cache: FetchSessionCache, changes: ChangedPartitions | None = None) -> None:
        self.cache = cache
        self.changes = changes or ChangedPartitions()
        self.contexts = {"full": 0, "incremental": 0, "sessionless": 0, "error": 0}
        self.partitions_read = 0  # by all fetches: an idle session partition adds nothing

    def stats(self) -> dict:
        """The cache's counts, and how many fetches of each kind it has seen."""
        return {**self.cache.stats(), "fetches": dict(self.contexts),
                "partitions_read": self.partitions_read}

    def new_context(self, metadata: FetchMetadata, partitions: list[FetchPartition],
                    forgotten: list[PartitionKey], *, is_follower: bool,
                    uses_topic_ids: bool = False) -> FetchContext:
        """`uses_topic_ids`: the Fetch is v13+ (partitions and forgotten keys by topic id)."""
        context = self._new_context(metadata, partitions, forgotten, is_follower, uses_topic_ids)
        self.contexts[context.kind] += 1
        return context

    def _new_context(self, metadata: FetchMetadata, partitions: list[FetchPartition],
                     forgotten: list[PartitionKey], is_follower: bool,
                     uses_topic_ids: bool) -> FetchContext:
        if metadata.is_full:
            if metadata.session_id != INVALID_SESSION_ID:
                self.cache.remove(metadata.session_id)  # a full fetch closes the session it names
            if metadata.epoch == FINAL_EPOCH:
                return FetchContext("sessionless", partitions)
            return FetchContext("full", partitions, _cache=self.cache, _privileged=is_follower,
                                _uses_topic_ids=uses_topic_ids, seq=self.changes.seq)
        session = self.cache.get(metadata.session_id)
        if session is None:
            return FetchContext("error", [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != metadata.epoch:
            return FetchContext("error", [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            # Kafka: a session opened with ids (v13+) cannot go on by names, nor the reverse.
            return FetchContext("error", [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(partitions, forgotten)
        if not session.partitions:
            self.cache.remove(session.id)
            return FetchContext("sessionless", partitions)
        grown = len(session.partitions) - max(session.cached_size, 0)
        if self.cache.num_partitions + grown > self.cache.max_partitions:
            self.cache.remove(session.id)  # the client starts over with a full fetch
            return FetchContext("error", [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        self.cache.touch(session, self.cache.now_ms())
        session.epoch = next_epoch(session.epoch)
        changed = session.changed_partitions(partitions, self.changes)
        if changed is None:
            return FetchContext("incremental",
                                [p.as_fetch_partition() for p in session.partitions.values()],
                                session=session, seq=self.changes.seq)
        return FetchContext("incremental", [p.as_fetch_partition() for p in changed],
                            session=session, narrowed=True, seq=self.changes.seq)
