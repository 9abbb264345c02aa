"""SharePartitionManager: ShareFetch and ShareAcknowledge at a partition's leader (Kafka's
SharePartitionManager). It keeps the share partitions of the partitions this broker leads (one
per group reading each), the share sessions of their consumers, and the share fetch purgatory
where a fetch that finds nothing to acquire waits for an append, a release or a lock's expiry.

A share partition starts from the state its share coordinator kept (SharePersister), else
where the group's `share.auto.offset.reset` says (latest: the high watermark, as Kafka), the
first time a member fetches it at this leader (and leader epoch). Acknowledgements, releases and
expired locks are written back (an acknowledgement is answered once it is kept); acquisitions
are not (after a failover, records acquired since the last write are delivered again).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.logs import get_logger
from broker.replication.purgatory import DelayedOperationPurgatory
from broker.share.delayed_share_fetch import DelayedShareFetch
from broker.share.share_partition import RecordState, SharePartition
from broker.share.share_session import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from broker.share.share_state_persister import UNAVAILABLE, SharePersister
from protocol.errors import ErrorCode, KafkaError
from timer.timer_task import FunctionTimerTask

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.group_configs import GroupConfigCache
    from broker.replication.partition import Partition
    from broker.replication.replica_manager import ReplicaManager
    from timer import SystemTimer

log = get_logger("kafka_sim.share")

PartitionKey = tuple[uuid.UUID, int]  # (topic id, partition), as share requests name them
Acknowledgements = list[tuple[int, int, list[int]]]  # (first offset, last offset, types)
# ShareFetch v2's ShareAcquireMode (KIP-1206, KIP-1222): whole batches, at most MaxRecords, or
# no acquisition at all (a fetch that only renews locks; 255 on the wire, -1 read as int8)
BATCH_OPTIMIZED, RECORD_LIMIT, RENEW_ONLY = 0, 1, -1
ACQUIRE_MODES = (BATCH_OPTIMIZED, RECORD_LIMIT, RENEW_ONLY)


@dataclass(slots=True)
class ShareFetchPartition:
    """A partition named by a ShareFetch or ShareAcknowledge, with its acknowledgements."""
    topic_id: uuid.UUID
    topic: str  # "" when the id is not a topic this broker knows
    partition: int
    acknowledgements: Acknowledgements = field(default_factory=list)

    @property
    def key(self) -> PartitionKey:
        return (self.topic_id, self.partition)


@dataclass(slots=True)
class SharePartitionData:
    """What a ShareFetch or ShareAcknowledge response says about one partition."""
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    acknowledge_error: ErrorCode = ErrorCode.NONE
    acknowledge_error_message: str | None = None
    records: bytes = b""
    acquired: list[tuple[int, int, int]] = field(default_factory=list)  # first, last, count


@dataclass(slots=True)
class ShareAnswer:
    error: ErrorCode
    error_message: str | None = None
    partitions: dict[PartitionKey, SharePartitionData] = field(default_factory=dict)
    acquisition_lock_timeout_ms: int = 0  # the group's share.record.lock.duration.ms


class SharePartitionManager:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, timer: SystemTimer,
                 group_configs: GroupConfigCache, persister: SharePersister) -> None:
        self.config = config
        self.replicas = replicas
        self.timer = timer
        self.group_configs = group_configs  # share.auto.offset.reset, share.record.lock...
        self.persister = persister
        self.share_partitions: dict[tuple[str, str, int], SharePartition] = {}
        self._starting: dict[tuple[str, str, int], asyncio.Future] = {}
        self._writing: dict[tuple[str, str, int], asyncio.Lock] = {}
        self._tasks: set[asyncio.Task] = set()
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.purgatory = DelayedOperationPurgatory("ShareFetch", timer)
        self._parked: set[DelayedShareFetch] = set()
        replicas.record_listeners.append(self.purgatory.check_and_complete)

    # -- ShareFetch ----------------------------------------------------------------------------

    async def share_fetch(
        self, group_id: str, member_id: str, epoch: int, partitions: list[ShareFetchPartition],
        forgotten: list[PartitionKey], *, max_wait_ms: int, max_bytes: int, max_records: int,
        acquire_mode: int = BATCH_OPTIMIZED, renew: bool = False,
    ) -> ShareAnswer:
        """One ShareFetch: the session checked and moved on, the acknowledgements applied, then
        records acquired for the member from the session's partitions (parked up to
        `max_wait_ms` when there are none). v2: `acquire_mode` RECORD_LIMIT acquires no more
        than `max_records`, RENEW_ONLY acquires nothing (its acknowledgements renew locks);
        `renew` allows Renew acknowledgements."""
        key = (group_id, member_id)
        await self.group_configs.overrides(group_id)
        if epoch == INITIAL_EPOCH:
            if any(p.acknowledgements for p in partitions):
                return ShareAnswer(ErrorCode.INVALID_REQUEST, "Acknowledge data present on "
                                   "initial share fetch request")
            if key not in self.sessions and \
                    len(self.sessions) >= self.config["group.share.max.share.sessions"]:
                return ShareAnswer(ErrorCode.SHARE_SESSION_LIMIT_REACHED, None)
            old = self.sessions.pop(key, None)
            if old is not None:
                self._release(old, member_id)
            session = self.sessions[key] = ShareSession(group_id, member_id)
            self._touch(session)
        elif epoch == FINAL_EPOCH and forgotten:
            return ShareAnswer(ErrorCode.INVALID_REQUEST, "The final share fetch of a session "
                               "cannot forget partitions")
        else:
            session, error = self._session(key, epoch)
            if session is None:
                return error
        answer = ShareAnswer(ErrorCode.NONE, acquisition_lock_timeout_ms=int(
            self.group_configs.value(group_id, "share.record.lock.duration.ms")))
        for p in partitions:
            if p.topic and epoch != FINAL_EPOCH:
                session.partitions[p.key] = p.topic
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp, topic in list(session.partitions.items()):
            await self._start(group_id, tp[0], topic, tp[1])
        for p in partitions:
            answer.partitions[p.key] = data = SharePartitionData()
            if not p.topic:
                data.error = ErrorCode.UNKNOWN_TOPIC_ID
            elif p.acknowledgements:
                await self._acknowledge(group_id, member_id, p, data, renew)
        if epoch == FINAL_EPOCH or acquire_mode == RENEW_ONLY:
            if epoch == FINAL_EPOCH:  # the last request of the session: locks let go
                self._close(session)
            return answer
        record_limit = acquire_mode == RECORD_LIMIT
        acquired = self._acquire(session, max_bytes, max_records, record_limit)
        if not acquired and max_wait_ms > 0 and max_records > 0 and not any(
                d.error for d in answer.partitions.values()):
            # (MaxBytes 0 is given nothing, as Kafka: it waits out MaxWaitMs, not to spin)
            acquired = await self._park(session, max_wait_ms, max_bytes, max_records,
                                        record_limit, acquiring=max_bytes > 0)
        for tp, data in acquired.items():
            known = answer.partitions.get(tp)
            if known is not None:
                data.acknowledge_error = known.acknowledge_error
                data.acknowledge_error_message = known.acknowledge_error_message
            answer.partitions[tp] = data
        return answer

    def _session(self, key: tuple[str, str], epoch: int
                 ) -> tuple[ShareSession | None, ShareAnswer]:
        session = self.sessions.get(key)
        if session is None:
            return None, ShareAnswer(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                     f"Share session for member {key[1]} not found")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return None, ShareAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                     f"Share session epoch {epoch} is not the expected "
                                     f"{session.epoch}")
        session.next_epoch()
        self._touch(session)
        return session, ShareAnswer(ErrorCode.NONE)

    def _touch(self, session: ShareSession) -> None:
        """(Re)start the session's idle timeout, a timer task."""
        if session.expiry is not None:
            session.expiry.cancel()

        def expire() -> None:
            if self.sessions.get((session.group_id, session.member_id)) is session:
                log.info("share session expired", group_id=session.group_id,
                         member_id=session.member_id)
                self._close(session)

        session.expiry = FunctionTimerTask(
            int(self.group_configs.value(session.group_id, "share.session.timeout.ms")), expire)
        self.timer.add(session.expiry)

    def _acquire(self, session: ShareSession, max_bytes: int, max_records: int,
                 record_limit: bool = False) -> dict[PartitionKey, SharePartitionData]:
        """Records acquired for the session's member, partition by partition, within the
        request's byte and record budgets (KIP-74: a first batch comes back whatever its size)."""
        out: dict[PartitionKey, SharePartitionData] = {}
        for tp, topic in list(session.partitions.items()):
            if max_records <= 0 or max_bytes <= 0:
                break
            if self.replicas.topic_id_of(topic) != tp[0]:  # deleted (and made again)
                session.partitions.pop(tp, None)
                out[tp] = SharePartitionData(ErrorCode.UNKNOWN_TOPIC_ID)
                continue
            try:
                share, partition = self._share_partition(session.group_id, topic, tp[1])
                committed = self._read_committed(session.group_id)
                end = partition.log.last_stable_offset if committed else partition.high_watermark
                if share is None or not share.can_acquire(end):
                    continue
                start = share.read_from()
                read = partition.log.read(start, max(1, max_bytes), max_offset=end,
                                          min_one_message=True, as_region=False)
                aborted = partition.log.aborted_transactions_in(start, read.records) \
                    if committed else None
                acquired = share.acquire(session.member_id, read.records, max_records, aborted,
                                         record_limit=record_limit)
            except KafkaError as exc:
                out[tp] = SharePartitionData(exc.code, exc.message)
                continue
            if acquired.ranges:
                out[tp] = SharePartitionData(records=acquired.records, acquired=acquired.ranges)
                max_records -= sum(last - first + 1 for first, last, _ in acquired.ranges)
                max_bytes -= len(acquired.records)
        return out

    async def _park(self, session: ShareSession, max_wait_ms: int, max_bytes: int,
                    max_records: int, record_limit: bool = False, *, acquiring: bool = True
                    ) -> dict[PartitionKey, SharePartitionData]:
        """Wait in the purgatory until a partition of the session has records to acquire (its
        key is checked on every append and high watermark move, and on every release)."""
        keys = [(topic, tp[1]) for tp, topic in session.partitions.items()]
        if not keys:
            return {}
        acquired: dict[PartitionKey, SharePartitionData] = {}
        waiting = [True]  # False once the request is gone: nothing is acquired for it then

        def ready() -> bool:
            if not acquiring:
                return False
            for tp, topic in list(session.partitions.items()):
                if self.replicas.topic_id_of(topic) != tp[0]:
                    return True  # answered UNKNOWN_TOPIC_ID at once
                try:
                    share, partition = self._share_partition(session.group_id, topic, tp[1])
                except KafkaError:
                    return True  # answered with the error at once
                end = partition.log.last_stable_offset if self._read_committed(
                    session.group_id) else partition.high_watermark
                if share is not None and share.can_acquire(end):
                    return True
            return False

        def complete() -> None:
            if waiting[0] and self.sessions.get((session.group_id, session.member_id)) is session:
                acquired.update(self._acquire(session, max_bytes, max_records, record_limit))

        op = DelayedShareFetch(max_wait_ms, ready, complete)
        # While the cluster's clock is frozen (`ctl clock freeze`), MaxWaitMs is the consumer's
        # long poll in real time, as a Fetch's (ReplicaManager.fetch_messages).
        real_deadline = asyncio.get_running_loop().call_later(max_wait_ms / 1000, op.run) \
            if getattr(self.replicas.clock, "frozen", False) else None
        self._parked.add(op)
        try:
            self.purgatory.try_complete_else_watch(op, keys)
            await op.wait()
        finally:
            self._parked.discard(op)
            if real_deadline is not None:
                real_deadline.cancel()
            if not op.is_completed:  # the connection went while parked
                waiting[0] = False
                op.force_complete()
        return acquired

    # -- ShareAcknowledge ----------------------------------------------------------------------

    async def share_acknowledge(self, group_id: str, member_id: str, epoch: int,
                                partitions: list[ShareFetchPartition], *, renew: bool = False
                                ) -> ShareAnswer:
        """One ShareAcknowledge: within a session (not its first request); -1 closes it.
        `renew` (v2) allows Renew acknowledgements."""
        key = (group_id, member_id)
        await self.group_configs.overrides(group_id)
        if epoch == INITIAL_EPOCH:
            return ShareAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                               "A share session cannot start with ShareAcknowledge")
        session, error = self._session(key, epoch)
        if session is None:
            return error
        answer = ShareAnswer(ErrorCode.NONE, acquisition_lock_timeout_ms=int(
            self.group_configs.value(group_id, "share.record.lock.duration.ms")))
        for p in partitions:
            answer.partitions[p.key] = data = SharePartitionData()
            if not p.topic:
                data.error = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            await self._acknowledge(group_id, member_id, p, data, renew)
            data.error, data.error_message = data.acknowledge_error, data.acknowledge_error_message
        if epoch == FINAL_EPOCH:
            self._close(session)
        return answer

    async def _acknowledge(self, group_id: str, member_id: str, p: ShareFetchPartition,
                           data: SharePartitionData, renew: bool = False) -> None:
        """Apply the acknowledgements, answered once the share coordinator keeps them."""
        try:
            share, _ = self._share_partition(group_id, p.topic, p.partition)
            if share is None:  # not started here: nothing of it was acquired from this leader
                raise KafkaError(ErrorCode.INVALID_RECORD_STATE,
                                 f"No records of {p.topic}-{p.partition} were acquired here")
            share.acknowledge(member_id, p.acknowledgements, renew=renew)
            error = await self.persist(share)
            if error != ErrorCode.NONE:
                raise KafkaError(error, "the acknowledgement could not be kept")
        except KafkaError as exc:
            data.acknowledge_error, data.acknowledge_error_message = exc.code, exc.message

    # -- share partitions ----------------------------------------------------------------------

    def _read_committed(self, group_id: str) -> bool:
        return self.group_configs.value(group_id, "share.isolation.level") == "read_committed"

    def _share_partition(self, group_id: str, topic: str, index: int
                         ) -> tuple[SharePartition | None, Partition]:
        """The group's started share partition of a partition this broker leads (None: not
        started at this leader epoch); NOT_LEADER_OR_FOLLOWER and the like otherwise."""
        key = (group_id, topic, index)
        try:
            partition = self.replicas.leader_partition(topic, index)
        except KafkaError:
            self._drop(key)  # no longer led here (or gone): its locks go
            raise
        share = self.share_partitions.get(key)
        if share is None or not self._current(share, partition):
            return None, partition
        share.move_start(partition.log_start_offset)
        share.lock_duration_ms = int(
            self.group_configs.value(group_id, "share.record.lock.duration.ms"))
        share.delivery_count_limit = int(
            self.group_configs.value(group_id, "share.delivery.count.limit"))
        return share, partition

    def _current(self, share: SharePartition, partition: Partition) -> bool:
        """Started at this leader epoch, for this topic (not one deleted and made again)."""
        return share.leader_epoch == partition.leader_epoch and \
            share.topic_id == self.replicas.topic_id_of(share.topic)

    def _drop(self, key: tuple[str, str, int]) -> None:
        share = self.share_partitions.pop(key, None)
        if share is not None:
            share.close()

    async def _start(self, group_id: str, topic_id: uuid.UUID, topic: str, index: int) -> None:
        """Start the share partition at this leader epoch, from the state its share coordinator
        kept (else at share.auto.offset.reset); left unstarted when that state cannot be read
        now, or when leadership moved meanwhile."""
        key = (group_id, topic, index)
        if self.replicas.topic_id_of(topic) != topic_id:
            return  # the topic was deleted: the fetch answers UNKNOWN_TOPIC_ID
        try:
            partition = self.replicas.leader_partition(topic, index)
        except KafkaError:
            return  # the fetch answers the error
        share = self.share_partitions.get(key)
        if share is not None and self._current(share, partition):
            return
        starting = self._starting.get(key)
        if starting is not None:  # another request is reading its state
            await asyncio.shield(starting)
            return
        self._drop(key)
        done = self._starting[key] = asyncio.get_running_loop().create_future()
        epoch = partition.leader_epoch
        try:
            state = await self.persister.read(group_id, topic_id, index, epoch)
            if state is UNAVAILABLE or not partition.is_leader or partition.leader_epoch != epoch:
                return
            if state is None:
                reset = self.group_configs.value(group_id, "share.auto.offset.reset")
                start = (partition.log_start_offset if reset == "earliest"
                         else partition.high_watermark)
            else:
                start = max(state.start_offset, partition.log_start_offset)
            config = self.config
            share = self.share_partitions[key] = SharePartition(
                group_id, topic, index, start, add_timer=self.timer.add,
                lock_duration_ms=int(
                    self.group_configs.value(group_id, "share.record.lock.duration.ms")),
                delivery_count_limit=int(
                    self.group_configs.value(group_id, "share.delivery.count.limit")),
                max_in_flight=config["group.share.partition.max.record.locks"],
                on_available=lambda: self.purgatory.check_and_complete((topic, index)),
                on_change=self._on_change, leader_epoch=epoch, topic_id=topic_id)
            if state is not None:
                share.state_epoch = state.state_epoch
                share.restore(state.batches)
            else:  # its start, kept (Kafka's InitializeShareGroupState)
                share.version += 1
                self._spawn(self.persist(share))
            log.info("share partition started", group_id=group_id, topic=topic,
                     partition=index, leader_epoch=epoch, start_offset=share.start_offset,
                     restored=state is not None)
        finally:
            del self._starting[key]
            done.set_result(None)

    # -- keeping the state -----------------------------------------------------------------------

    def _on_change(self, share: SharePartition) -> None:
        self._spawn(self.persist(share))

    async def persist(self, share: SharePartition) -> ErrorCode:
        """Write the share partition's state to its share coordinator unless a write since its
        last change did; writes of one share partition go one at a time, the last state each."""
        wanted = share.version
        key = (share.group_id, share.topic, share.partition)
        lock = self._writing.setdefault(key, asyncio.Lock())
        async with lock:
            if share.persisted >= wanted:
                return ErrorCode.NONE
            version = share.version
            start, batches = share.snapshot()
            error = await self.persister.write(share.group_id, share.topic_id, share.partition,
                                               share.leader_epoch, start, batches,
                                               share.state_epoch)
            if error == ErrorCode.NONE:
                share.persisted = max(share.persisted, version)
            elif error == ErrorCode.FENCED_STATE_EPOCH:  # reset meanwhile: start again from it
                if self.share_partitions.get(key) is share:
                    self._drop(key)
            else:
                log.warning("share partition state not kept", group_id=share.group_id,
                            topic=share.topic, partition=share.partition, error=error.name)
            return error

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _close(self, session: ShareSession) -> None:
        """The session's last request (or its idle timeout): it goes (unless a new one replaced
        it meanwhile), what its member acquired is Available again, and a share partition no
        session of its group reads any more leaves memory once its state is kept (the next
        session reads it again from the share coordinator)."""
        key = (session.group_id, session.member_id)
        if self.sessions.get(key) is session:
            del self.sessions[key]
        if session.expiry is not None:
            session.expiry.cancel()
        self._release(session, session.member_id)
        read = {(s.group_id, topic, tp[1]) for s in self.sessions.values()
                if s.group_id == session.group_id for tp, topic in s.partitions.items()}
        for tp, topic in session.partitions.items():
            share_key = (session.group_id, topic, tp[1])
            if share_key not in read and share_key in self.share_partitions:
                self._spawn(self._retire(share_key))

    async def _retire(self, key: tuple[str, str, int]) -> None:
        share = self.share_partitions.get(key)
        if share is None or await self.persist(share) != ErrorCode.NONE:
            return
        reading = any(s.group_id == key[0] and (key[1], key[2]) in {
            (topic, tp[1]) for tp, topic in s.partitions.items()} for s in self.sessions.values())
        if not reading and self.share_partitions.get(key) is share and not any(
                r.state == RecordState.ACQUIRED for _, r in share.records()):
            self._drop(key)

    def _release(self, session: ShareSession, member_id: str) -> None:
        """A closed or replaced session: what its member acquired is Available again."""
        for tp, topic in session.partitions.items():
            share = self.share_partitions.get((session.group_id, topic, tp[1]))
            if share is not None:
                share.release_member(member_id)

    def shutdown(self) -> None:
        for op in list(self._parked):  # answered with what is there now
            op.force_complete()
        for task in self._tasks:
            task.cancel()
        for session in self.sessions.values():
            if session.expiry is not None:
                session.expiry.cancel()
        self.purgatory.shutdown()
        for share in self.share_partitions.values():
            share.close()
        self.share_partitions.clear()
        self.sessions.clear()
