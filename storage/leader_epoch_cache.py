"""LeaderEpochFileCache: where each leader epoch starts in a partition's log (Kafka's KIP-101 cache).

Invariant: entries are strictly increasing in both epoch and start offset, and mirror the log's
batches (each batch's partitionLeaderEpoch). Every change is written atomically to
`leader-epoch-checkpoint` in the partition folder ("0", a count, then "epoch start_offset" lines),
through the log's flusher (a worker thread in the broker); a crash before the write lands leaves an
older file, which loading repairs (see `load`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from protocol.errors import KafkaError
from storage.checkpoint import (
    checkpoint_text,
    malformed_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from storage.disk_faults import DiskFaults
from storage.log_flusher import Job, run_now
from storage.naming import as_path

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    """A tuple rather than a dataclass so that callers can unpack `for epoch, start in ...`."""

    epoch: int
    start_offset: int


class LeaderEpochCheckpointFile:
    """The file alone: Kafka's text format, replaced atomically (temp file, fsync, rename)."""

    def __init__(self, path: Path, disk: DiskFaults | None = None) -> None:
        self.path = as_path(path)
        self.disk = disk  # its log dir's injected faults (checkpoint kind)

    def write(self, entries: Sequence[EpochEntry]) -> None:
        write_checkpoint(self.path, self.rows(entries), self.disk)

    @staticmethod
    def rows(entries: Sequence[EpochEntry]) -> list[str]:
        return [f"{e.epoch} {e.start_offset}" for e in entries]

    def read(self) -> list[EpochEntry] | None:
        """The stored entries; None when there is no file. Raises on a malformed or unordered file."""
        rows = read_checkpoint(self.path, 2)
        if rows is None:
            return None
        entries: list[EpochEntry] = []
        for epoch, start_offset in rows:
            line = f"{epoch} {start_offset}"
            try:
                entry = EpochEntry(int(epoch), int(start_offset))
            except ValueError:
                raise malformed_checkpoint(self.path, f"bad line {line!r}") from None
            previous = entries[-1] if entries else EpochEntry(-1, -1)
            if entry.epoch <= previous.epoch or entry.start_offset <= previous.start_offset:
                raise malformed_checkpoint(self.path, f"entry {line!r} breaks the order")
            entries.append(entry)
        return entries


class LeaderEpochFileCache:
    """Epoch -> start offset for one partition; the log calls it on appends, truncation, retention."""

    def __init__(
        self, checkpoint: LeaderEpochCheckpointFile, entries: Iterable[EpochEntry] = (),
        submit: Callable[[Job], None] = run_now,
    ) -> None:
        self.checkpoint = checkpoint
        self._submit = submit
        self._writes = 0  # checkpoint writes asked for; a queued one that is not the last is skipped
        self._entries: list[EpochEntry] = []
        for epoch, start_offset in entries:
            self._assign(EpochEntry(epoch, start_offset))

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self._entries})"

    @classmethod
    def load(
        cls,
        directory: Path,
        *,
        log_start_offset: int,
        log_end_offset: int,
        last_batch: tuple[int, int] | None,
        scan: Callable[[], Iterable[tuple[int, int]]],
        submit: Callable[[Job], None] = run_now,
        disk: DiskFaults | None = None,
    ) -> LeaderEpochFileCache:
        """Open a partition's cache: trust the checkpoint when it agrees with the log, else rebuild.

        `last_batch` is (partitionLeaderEpoch, base offset) of the log's last batch (None when
        empty); `scan()` yields that pair for every batch, oldest first, for a rebuild. Entries are
        written before their batches, but the write may not have landed when the broker crashed:
        a last batch of an epoch the file does not know makes a rebuild, as a damaged file does.
        """
        checkpoint = LeaderEpochCheckpointFile(Path(directory) / LEADER_EPOCH_CHECKPOINT, disk)
        try:
            entries = checkpoint.read()
        except KafkaError:
            entries = None  # a damaged checkpoint is rebuilt like a missing one
        cache = cls(checkpoint, entries or (), submit)
        if entries is not None:
            # Entries are written before their batches: a crash can leave some at/after the LEO.
            cache.truncate_from_end(log_end_offset)
            cache.truncate_from_start(log_start_offset)
            if cache._matches_tail(last_batch):
                return cache
        if entries is not None or last_batch is not None:
            cache.rebuild(scan())
            cache.truncate_from_start(log_start_offset)
        return cache

    def _matches_tail(self, last_batch: tuple[int, int] | None) -> bool:
        """The log's last batch must belong to the latest epoch, which starts at/before it."""
        if last_batch is None or last_batch[0] < 0:
            return True  # nothing to compare with (empty, or written without epochs)
        epoch, base_offset = last_batch
        latest = self.latest_entry
        return latest is not None and latest.epoch == epoch and latest.start_offset <= base_offset

    # -- queries -------------------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers it (Kafka's endOffsetFor).

        - the latest epoch is still being written: it ends at the log end offset;
        - otherwise the largest epoch <= requested, ending where the next higher epoch starts;
        - below every known epoch (retention removed them): (requested, first start offset), so a
          follower truncates no further than the leader's oldest data;
        - UNDEFINED or above every known epoch: (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._entries, requested_epoch, key=lambda e: e.epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        end_offset = self._entries[higher].start_offset
        if higher == 0:
            return requested_epoch, end_offset
        return self._entries[higher - 1].epoch, end_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at `offset` was written in; -1 when before every entry."""
        i = bisect.bisect_right(self._entries, offset, key=lambda e: e.start_offset)
        return self._entries[i - 1].epoch if i else UNDEFINED_EPOCH

    # -- changes (each one handed to the flusher before returning) -----------------------------------

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; True when the cache changed. Without
        `flush` the caller writes the file (`checkpoint_text`) itself.

        Kafka's rules: the same epoch again at a later offset changes nothing; an entry that would
        break the order (an epoch >= the new one, or a start offset >= the new one) is dropped from
        the end first, so the cache always describes the log as it now is.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"cannot assign epoch {epoch} at offset {start_offset}")
        if not self._assign(EpochEntry(epoch, start_offset)):
            return False
        if flush:
            self._flush()
        return True

    def checkpoint_text(self) -> str:
        """The file's text for the entries as they are now."""
        return checkpoint_text(self.checkpoint.rows(self._entries))

    def _assign(self, entry: EpochEntry) -> bool:
        latest = self.latest_entry
        if (
            latest is not None
            and entry.epoch == latest.epoch
            and entry.start_offset >= latest.start_offset
        ):
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Forget epochs starting at/after `end_offset` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or end_offset > self._entries[-1].start_offset:
            return False
        keep = bisect.bisect_left(self._entries, end_offset, key=lambda e: e.start_offset)
        del self._entries[keep:]
        self._flush()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Forget epochs wholly below `start_offset`; the one covering it now starts there."""
        covered = bisect.bisect_right(self._entries, start_offset, key=lambda e: e.start_offset)
        if covered == 0 or (covered == 1 and self._entries[0].start_offset == start_offset):
            return False
        kept = EpochEntry(self._entries[covered - 1].epoch, start_offset)
        self._entries[:covered] = [kept]
        self._flush()
        return True

    def clear(self) -> None:
        self._entries.clear()
        self._flush()

    def rebuild(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace everything with assigns of (epoch, offset) pairs (from a log scan); one write."""
        self._entries.clear()
        for epoch, start_offset in entries:
            if epoch >= 0:  # batches written before leader epochs existed carry -1
                self._assign(EpochEntry(epoch, start_offset))
        self._flush()

    def _flush(self) -> None:
        self._writes += 1
        write, entries = self._writes, list(self._entries)

        def job() -> None:
            if write == self._writes:  # else a newer state is queued behind: write that one only
                self.checkpoint.write(entries)

        self._submit(job)
