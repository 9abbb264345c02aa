"""Followers: one fetcher task per (follower broker, leader broker) pair.

A fetcher fetches every partition it follows from that leader in one Fetch with `replica_id` set,
appends what comes back, and takes the leader's high watermark (capped at its own log end
offset). Its fetch offset is its log end offset, which is how the leader learns it. A partition
that just got a new leader first truncates: it asks the leader (OffsetForLeaderEpoch) where its
latest epoch ends and cuts off anything beyond, so divergent records never survive a failover.

It fetches in a fetch session (KIP-227, fetch_session_handler.py): once the session is open a
Fetch names only the partitions whose fetch offset moved, and the leader answers only those with
something new; a failed or abandoned fetch starts a new session with a full fetch. The fetcher
keeps each partition's request and remakes only those of partitions that changed since its last
round (its broker's ChangedPartitions, and what it did itself): a round costs what changed, not
the number of partitions followed.

The leader is reached through a `LeaderEndpoint` (leader_endpoint.py); the fetcher knows only its
follower's id and that follower's partitions, not the ReplicaManager that owns it.

One partition's failure is that partition's alone (Kafka's AbstractFetcherThread and its
partitionsWithError): an error appending or truncating it is logged and that partition is left
out of fetches for a backoff, while the others go on being fetched and appended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.logs import get_logger
from broker.replication.delayed_fetch import FetchParams, FetchPartition
from broker.replication.fetch_session import ChangedPartitions
from broker.replication.fetch_session_handler import FetchSessionHandler, FetchSessionResponse
from broker.replication.leader_endpoint import EpochEndOffset, LeaderEndpoint, LeaderUnavailable
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.replication.partition import Partition

log = get_logger("kafka_sim.replica_fetcher")
BACKOFF_S = 0.1  # after an error talking to the leader, as replica.fetch.backoff.ms


@dataclass(slots=True)
class FollowedPartition:
    """A partition this broker's fetcher follows from its leader."""
    topic: str
    partition: int
    leader_epoch: int
    truncating: bool = True  # a new leader: truncate before fetching
    delayed_until: float = 0.0  # loop time: after an error it sits out fetches until then
    failures: int = 0  # errors processing it since its last success, for the control API and tests

    def delay(self, now: float) -> None:
        self.failures += 1
        self.delayed_until = now + BACKOFF_S


class ReplicaFetcher:
    def __init__(
        self,
        follower_id: int,
        follower_partitions: Mapping[tuple[str, int], Partition],
        leader_id: int,
        endpoint: LeaderEndpoint,
        *,
        max_wait_ms: int,
        max_bytes: int,
        changes: ChangedPartitions | None = None,
    ) -> None:
        """`changes`: the broker's record of changed partitions (their logs' appends,
        truncations, log start moves); without it every request is remade each round."""
        self.follower_id = follower_id
        self.follower_partitions = follower_partitions  # the follower's own, updated by its owner
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.max_wait_ms = max_wait_ms
        self.max_bytes = max_bytes
        self.partitions: dict[tuple[str, int], FollowedPartition] = {}
        self._changed = asyncio.Event()
        self._running = asyncio.Event()
        self._running.set()
        self._task: asyncio.Task | None = None
        self.session = FetchSessionHandler()
        self._changes = changes
        self._seen_seq = -1  # `changes` read up to here
        self._requests: dict[tuple[str, int], FetchPartition] = {}  # what each fetchable sends
        self._stale: set[tuple[str, int]] = set()  # requests to remake before the next build
        self._delayed: dict[tuple[str, int], float] = {}  # backing off until (loop time)
        self._truncating: set[tuple[str, int]] = set()  # new partitions to truncate first

    # -- control ----------------------------------------------------------------------------

    def add_partition(self, topic: str, partition: int, leader_epoch: int) -> None:
        self.partitions[(topic, partition)] = FollowedPartition(topic, partition, leader_epoch)
        self._stale.add((topic, partition))
        self._truncating.add((topic, partition))
        self._changed.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"fetcher-{self.leader_id}")

    def remove_partition(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)
        self._stale.add(key)
        self._truncating.discard(key)

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.endpoint.close()

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._running.wait()
            if not self.partitions:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                await self._truncate()
                await self._fetch_once()
            except LeaderUnavailable:
                await asyncio.sleep(BACKOFF_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetch failed", follower=self.follower_id,
                              leader=self.leader_id)
                await asyncio.sleep(BACKOFF_S)


    def _partition_failed(self, fp: FollowedPartition, what: str) -> None:
        log.exception(f"unexpected error {what} partition; it backs off",
                      follower=self.follower_id, leader=self.leader_id,
                      topic=fp.topic, partition=fp.partition)
        fp.delay(asyncio.get_running_loop().time())
        self._delayed[(fp.topic, fp.partition)] = fp.delayed_until
        self._stale.add((fp.topic, fp.partition))

    async def _truncate(self) -> None:
        if not self._truncating:
            return
        now = asyncio.get_running_loop().time()
        pending = [fp for fp in map(self.partitions.get, self._truncating)
                   if fp is not None and fp.truncating and fp.delayed_until <= now]
        if not pending:
            return
        requests = []
        for fp in pending:
            partition = self.follower_partitions.get((fp.topic, fp.partition))
            latest = partition.log.leader_epoch_cache.latest_epoch if partition else -1
            requests.append((fp.topic, fp.partition, fp.leader_epoch, latest))
        answers = await self.endpoint.offsets_for_leader_epoch(requests)
        for fp, answer in zip(pending, answers, strict=True):
            partition = self.follower_partitions.get((fp.topic, fp.partition))
            if partition is None or self.partitions.get((fp.topic, fp.partition)) is not fp:
                continue
            if answer.error != ErrorCode.NONE:
                continue  # the leader is not ready for this epoch yet: ask again next round
            try:
                self._truncate_partition(fp, partition, answer)
            except Exception:
                self._partition_failed(fp, "truncating")

    def _truncate_partition(self, fp: FollowedPartition, partition: Partition, answer: EpochEndOffset) -> None:
        """Cut off what diverges from the leader, as its OffsetForLeaderEpoch answer says."""
        log_ = partition.log
        if answer.end_offset >= 0:
            target = min(answer.end_offset, log_.log_end_offset)
            # The leader may answer with an older epoch than we asked about: where that epoch
            # ends in our own log caps the truncation too (our later epochs diverged).
            _, own_end = log_.end_offset_for_epoch(answer.leader_epoch)
            if own_end >= 0:
                target = min(target, own_end)
        else:  # no common epoch: keep what is below the high watermark, as older Kafka did
            target = min(log_.high_watermark, log_.log_end_offset)
        if target < log_.log_end_offset:
            log.info("truncating follower", broker=self.follower_id, topic=fp.topic,
                     partition=fp.partition, from_offset=log_.log_end_offset, to_offset=target)
            log_.truncate_to(target)
        fp.truncating = False
        self._truncating.discard((fp.topic, fp.partition))
        self._stale.add((fp.topic, fp.partition))

    def _remake_stale_requests(self, now: float) -> list[tuple[str, int]]:
        """Remake the requests of partitions changed since the last round; returns their keys."""
        changes = self._changes
        if changes is None or self._seen_seq < changes.floor:
            self._stale.update(self.partitions)  # a removed one is stale already
        else:
            self._stale.update(k for k in changes.since(self._seen_seq) if k in self.partitions)
        if changes is not None:
            self._seen_seq = changes.seq
        for key, until in list(self._delayed.items()):
            if until <= now:
                del self._delayed[key]
                self._stale.add(key)
        stale, self._stale = list(self._stale), set()
        for key in stale:
            fp = self.partitions.get(key)
            partition = self.follower_partitions.get(key)
            if fp is None or partition is None or fp.truncating or fp.delayed_until > now:
                self._requests.pop(key, None)
            else:
                self._requests[key] = FetchPartition(
                    fp.topic, fp.partition, partition.log_end_offset, self.max_bytes,
                    fp.leader_epoch, partition.log_start_offset)
        return stale

    async def _fetch_once(self) -> None:
        now = asyncio.get_running_loop().time()
        stale = self._remake_stale_requests(now)
        if not self._requests:
            await asyncio.sleep(BACKOFF_S)
            return
        params = FetchParams(replica_id=self.follower_id, max_wait_ms=self.max_wait_ms,
                             min_bytes=1, max_bytes=self.max_bytes)
        # In a fetch session only what changed is sent: a partition whose log end offset did not
        # move costs the leader a check, not a place in the request and the response.
        request = self.session.build_from(self._requests, stale)
        self._changed.clear()
        if not self.endpoint.answers_when_asked:
            # Over TCP the leader answers by itself within max_wait_ms: the fetch is awaited
            # as it is, with no task of its own (one per round trip costs the follower more
            # than the rest of its round).
            try:
                response = await self.endpoint.fetch(params, request.metadata, request.to_send,
                                                     request.to_forget)
            except Exception:
                self.session.handle_error()
                raise
            await self._handle_fetched(response)
            return
        # A fetch can wait up to max_wait_ms at the leader; a partition added meanwhile should
        # not wait that long for its first fetch: an in-process leader is asked to answer the
        # parked fetch now (its session goes on: abandoning it would make the next fetch a full
        # one, every partition again, at each LeaderAndIsr).
        fetch = asyncio.ensure_future(self.endpoint.fetch(
            params, request.metadata, request.to_send, request.to_forget))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({fetch, changed}, return_when=asyncio.FIRST_COMPLETED)
            if not fetch.done():
                self.endpoint.answer_now(self.follower_id)
                await asyncio.wait({fetch})
        finally:
            changed.cancel()
            if not fetch.done():
                fetch.cancel()  # the leader answers the parked fetch as abandoned
            elif not fetch.cancelled():
                fetch.exception()  # seen, even when this task is cancelled as it failed
        if not fetch.done() or fetch.cancelled():
            self.session.handle_error()  # the leader's epoch may have moved: start a new session
            try:
                await fetch
            except asyncio.CancelledError:
                # The abandoned fetch's own cancellation is expected; this task's is not ours to
                # swallow (stop() waits for it).
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
            return
        if fetch.exception() is not None:
            self.session.handle_error()
        await self._handle_fetched(fetch.result())

    async def _handle_fetched(self, response: FetchSessionResponse) -> None:
        """Append what the leader sent, partition by partition (an error is that partition's)."""
        if not self.session.handle_response(response):
            return  # a session error: the next fetch is a full one, at once
        if not self._running.is_set():
            # Paused while the fetch was parked: nothing is appended, and the session starts over
            # so that nothing the leader counts as told is lost.
            self.session.handle_error()
            return
        progressed = not response.partitions  # nothing new anywhere is no error either
        for key, data in response.partitions.items():
            # An incremental answer carries only what has something new, each answered for the
            # request its session holds (the one last sent for that partition).
            request = self.session.session_partitions.get(key)
            if request is None:
                continue
            fp = self.partitions.get(key)
            partition = self.follower_partitions.get(key)
            if fp is None or partition is None or partition.log_end_offset != request.fetch_offset:
                continue  # removed, or moved on (truncated) while the fetch was out
            try:
                if data.error == ErrorCode.NONE:
                    partition.append_records_as_follower(data.records, data.high_watermark,
                                                         data.log_start_offset)
                    fp.failures = 0
                    progressed = True
                elif data.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    if data.log_start_offset > partition.log_end_offset:
                        # All we lack is below the leader's log start (DeleteRecords, retention):
                        # start over there, as Kafka's fetchOffsetAndTruncate does.
                        partition.log.truncate_fully_and_start_at(data.log_start_offset)
                    else:
                        fp.truncating = True  # find the common point again
                        self._stale.add(key)
                # NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH: wait for the controller's next word
            except Exception:
                self._partition_failed(fp, "processing fetched data of")
        if not progressed:
            await asyncio.sleep(BACKOFF_S)  # every partition erred: do not spin on the leader
