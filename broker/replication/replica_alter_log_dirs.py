"""ReplicaAlterLogDirsManager: moves a replica to another log dir of this broker (AlterReplicaLogDirs),
as Kafka's ReplicaAlterLogDirsThread: a copier task reads the current log and appends to the future
log, then swaps it in once it has caught up.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
from collections.abc import Callable

from broker.logs import get_logger
from protocol.errors import ErrorCode, KafkaError
from storage.log import Log
from storage.log_dir_failure_channel import KafkaStorageError
from storage.log_manager import LogManager

log = get_logger("kafka_sim.alter_log_dirs")
TopicPartition = tuple[str, int]
COPY_CHUNK_BYTES = 1 << 20  # read from the current log per step
# A chunk larger than this is appended to the future log in a worker thread (the future log has
# its own descriptors and flushes inline, so nothing shared is touched there).
APPEND_OFF_LOOP_BYTES = 64 * 1024
IDLE_WAIT_S = 0.005  # how long a copier that found nothing new waits before it looks again


class ReplicaAlterLogDirsManager:
    def __init__(self, log_manager: LogManager,
                 current_log: Callable[[TopicPartition], Log | None],
                 on_swapped: Callable[[TopicPartition, Log], None],
                 topic_id_of: Callable[[str], uuid.UUID | None],
                 is_offline: Callable[[TopicPartition], bool],
                 known_partition: Callable[[str, int], bool]) -> None:
        self.log_manager = log_manager
        # The hosted partition's current log (the ReplicaManager's), or None once not hosted.
        self._current_log = current_log
        self._on_swapped = on_swapped  # the partition takes the swapped-in log
        self._topic_id_of = topic_id_of
        self._is_offline = is_offline  # hosted here on a failed dir (HostedPartition.Offline)
        self._known_partition = known_partition  # the cluster has it (the metadata cache)
        # log.dirs by absolute path, as requests name them (Kafka's isLogDirOnline compares those)
        self._by_path = {os.path.abspath(name): name for name in log_manager.dirs}
        self._copiers: dict[TopicPartition, asyncio.Task] = {}
        self._in_thread: set[asyncio.Future] = set()
        self.swapped: dict[TopicPartition, asyncio.Event] = {}  # set when a move finished

    def alter(self, key: TopicPartition, destination: str) -> ErrorCode:
        """Kafka's alterReplicaLogDirs for one partition: LOG_DIR_NOT_FOUND for a path that is not
        one of log.dirs, KAFKA_STORAGE_ERROR for an offline dir or partition, REPLICA_NOT_AVAILABLE
        when it is not hosted here (the dir is remembered for when it is)."""
        manager = self.log_manager
        name = self._by_path.get(destination)
        if name is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if manager.dirs[name].offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self._is_offline(key):
            return ErrorCode.KAFKA_STORAGE_ERROR
        current = manager.get_log(*key)
        future = manager.get_future_log(*key)
        if future is not None and future.log_dir != name:  # moving elsewhere now: start over
            self.cancel(key)
            manager.delete_future_log(*key)
        # Remembered only for partitions the cluster has: a request naming made-up ones must not
        # grow the map without bound.
        if self._known_partition(*key) and (current is None or current.log_dir != name) and (
                future is None or future.log_dir != name):
            manager.preferred_log_dirs[key] = name
        if self._current_log(key) is None or current is None:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        manager.preferred_log_dirs.pop(key, None)
        if current.log_dir == name:
            return ErrorCode.NONE  # already there
        try:
            manager.create_future_log(*key, name, self._topic_id_of(key[0]))
        except KafkaStorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR
        self.start(key)
        return ErrorCode.NONE

    def start(self, key: TopicPartition) -> None:
        """Run the copier of a partition with a future log (a move begun, or found at start-up)."""
        if key in self._copiers or self.log_manager.get_future_log(*key) is None:
            return
        self.swapped.setdefault(key, asyncio.Event()).clear()
        self._copiers[key] = asyncio.create_task(self._copy(key), name=f"alter-log-dir-{key}")

    def cancel(self, key: TopicPartition) -> None:
        task = self._copiers.pop(key, None)
        if task is not None:
            task.cancel()

    def moving(self) -> set[TopicPartition]:
        return set(self._copiers)

    async def shutdown(self) -> None:
        """Stop every copier; an append running in a worker thread is waited for (the logs are
        closed next)."""
        for key in list(self._copiers):
            self.cancel(key)
        while self._in_thread:
            await asyncio.gather(*self._in_thread, return_exceptions=True)

    async def _copy(self, key: TopicPartition) -> None:
        manager = self.log_manager
        truncations, flushed = None, False
        mine = manager.get_future_log(*key)  # what this copier fills (a new move gets a new one)
        try:
            while True:
                current, future = self._current_log(key), manager.get_future_log(*key)
                if current is None or future is None or future is not mine:
                    return  # no longer hosted here (its future log went with it), or abandoned
                if truncations != current.truncations or \
                        future.log_end_offset > current.log_end_offset or \
                        future.log_end_offset < current.log_start_offset:
                    # The current log was truncated (or its start moved past the copy): what
                    # was copied may differ now; start the copy again at its start.
                    truncations, flushed = current.truncations, False
                    future.truncate_fully_and_start_at(current.log_start_offset)
                if future.log_end_offset == current.log_end_offset:
                    if not flushed:
                        # What was copied is durable, off the loop. Once: what a steady
                        # producer appends during an fsync is copied after it, and a flush
                        # each time the copy catches up would never let it catch up for good.
                        await self._in_worker(future.flush)
                        flushed = True
                    # What the partition appended meanwhile is copied on the loop, then the swap,
                    # with nothing awaited in between (Kafka holds the partition's lock for it):
                    # under a steady producer the copy would never be caught up otherwise.
                    if self._current_log(key) is not current or \
                            manager.get_future_log(*key) is not future or \
                            truncations != current.truncations:
                        continue
                    tail = bytes(current.read(future.log_end_offset, APPEND_OFF_LOOP_BYTES,
                                              max_offset=current.log_end_offset).records)
                    if tail:
                        future.append_as_follower(tail)
                    if future.log_end_offset != current.log_end_offset:
                        continue  # more than a small tail came: copy it in chunks
                    if key in manager.dirs[current.log_dir].cleaner.in_progress:
                        await asyncio.sleep(IDLE_WAIT_S)  # never under a cleaner's worker's feet
                        continue
                    self._swap(key)
                    return
                data = bytes(current.read(future.log_end_offset, COPY_CHUNK_BYTES,
                                          max_offset=current.log_end_offset).records)
                if not data:
                    await asyncio.sleep(IDLE_WAIT_S)
                elif len(data) > APPEND_OFF_LOOP_BYTES:
                    await self._in_worker(functools.partial(future.append_as_follower, data))
                else:
                    future.append_as_follower(data)
                    await asyncio.sleep(0)  # the loop's other work between two chunks
                # Checkpointed with it: a crash mid-swap leaves the log with its high watermark.
                future.high_watermark = min(current.high_watermark, future.log_end_offset)
        except asyncio.CancelledError:
            raise
        except KafkaError as exc:  # a failed dir: the failure channel has taken it offline
            log.warning("replica move stopped", topic=key[0], partition=key[1],
                        error=exc.code.name, reason=exc.message)
            with contextlib.suppress(KafkaError):
                if manager.get_future_log(*key) is mine and \
                        not manager.failure_channel.is_offline(mine.log_dir):
                    manager.delete_future_log(*key)
        finally:
            if self._copiers.get(key) is asyncio.current_task():
                del self._copiers[key]

    async def _in_worker(self, job: Callable[[], object]) -> None:
        """Run `job` in a worker thread; a cancelled copier still lets it finish (shutdown waits)."""
        running = asyncio.ensure_future(asyncio.to_thread(job))
        self._in_thread.add(running)
        running.add_done_callback(self._in_thread.discard)
        # Its error, if the copier was cancelled meanwhile, is nobody's (the move was abandoned).
        running.add_done_callback(lambda done: done.cancelled() or done.exception())
        await asyncio.shield(running)

    def _swap(self, key: TopicPartition) -> None:
        """On the loop, with nothing awaited since the copy caught up: the future log becomes the
        partition's log (Kafka's replaceCurrentWithFutureLog)."""
        new_log = self.log_manager.replace_current_with_future(*key)
        self._on_swapped(key, new_log)
        log.info("replica moved", topic=key[0], partition=key[1], log_dir=new_log.log_dir)
        self.swapped.setdefault(key, asyncio.Event()).set()
