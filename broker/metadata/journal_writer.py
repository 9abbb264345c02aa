"""The embedded metadata store's one writer thread: it appends committed transactions to the journal
in order, many per fsync (group commit), and rewrites the snapshot when the journal outgrows it.

The thread keeps its own image of the persistent nodes, built from the records it wrote, so that a
snapshot never reads the event loop's tree and is always the state at the last record written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from broker.logs import get_logger
from storage.metadata_image import JOURNAL, LoadedImage, MetadataTxn, encode_txn, write_snapshot
from storage.txn_log import frames

log = get_logger("kafka_sim.metadata_store")

# The journal is folded into a new snapshot once it is larger than both this and the snapshot, so
# the bytes written stay proportional to the changes (ZooKeeper rolls after snapCount records).
MIN_ROLL_BYTES = 1 << 20
DurableCallback = Callable[[int, BaseException | None], None]  # (last seq written, error or None)


class JournalWriter:
    def __init__(self, directory: Path, loaded: LoadedImage, on_durable: DurableCallback,
                 *, min_roll_bytes: int = MIN_ROLL_BYTES) -> None:
        self.directory = directory
        self.image = loaded.image  # the writer thread's own from now on
        self.snapshot_bytes = loaded.snapshot_bytes
        self.journal_bytes = loaded.journal_bytes
        self.min_roll_bytes = min_roll_bytes
        self.snapshots_written = 0
        self.error: BaseException | None = None  # the first failed write; nothing is written after
        self._on_durable = on_durable
        self._journal = open(directory / JOURNAL, "ab")  # noqa: SIM115 - the thread closes it
        self._cond = threading.Condition()
        self._pending: list[MetadataTxn] = []
        self._submitted = 0  # seq of the last record submitted
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="metadata-journal", daemon=True)
        self._thread.start()

    def submit(self, txn: MetadataTxn) -> int:
        """Queue a record; returns its sequence number (on_durable reports it once fsynced)."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the metadata journal is closed")
            self._pending.append(txn)
            self._submitted += 1
            self._cond.notify()
            return self._submitted

    def close(self) -> None:
        """Write what is queued, then stop the thread and close the journal."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._pending and not self._closing:
                        self._cond.wait()
                    batch, self._pending, seq = self._pending, [], self._submitted
                if not batch:
                    return  # closing, and everything queued is written
                self._persist(batch, seq)
        except BaseException as exc:  # a bug: fail every flush rather than leave them waiting
            log.exception("metadata journal writer stopped")
            self.error = self.error or exc
            self._on_durable(self._submitted, self.error)
        finally:
            self._journal.close()

    def _persist(self, batch: list[MetadataTxn], seq: int) -> None:
        if self.error is None:
            try:
                data = frames(encode_txn(txn) for txn in batch)
                self._journal.write(data)
                self._journal.flush()
                os.fsync(self._journal.fileno())
            except OSError as exc:
                # A record may be half written: appending after it would hide every later one
                # behind a torn frame on the next load, so nothing more is written.
                log.error("metadata journal write failed: the store keeps changes in memory only "
                          "until restarted", error=repr(exc))
                self.error = exc
            else:
                for txn in batch:
                    self.image.apply(txn)
                self.journal_bytes += len(data)
        self._on_durable(seq, self.error)
        if self.error is None and self.journal_bytes > max(self.min_roll_bytes, self.snapshot_bytes):
            self._roll()

    def _roll(self) -> None:
        """A new snapshot at the last record written, then an empty journal. A crash between the
        two leaves records the snapshot already holds, which loading skips by their zxid."""
        try:
            self.snapshot_bytes = write_snapshot(self.directory, self.image)
            self._journal.truncate(0)
            self._journal.flush()
            os.fsync(self._journal.fileno())
        except OSError as exc:  # the journal is still whole: keep appending, retry next time
            log.warning("metadata snapshot failed", error=repr(exc))
            return
        self.journal_bytes = 0
        self.snapshots_written += 1
