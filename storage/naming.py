"""File and folder naming rules for logs on disk, in one place (Kafka's LocalLog/UnifiedLog names)."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions (storage/transaction_index.py)
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
TEMP_SUFFIX = ".tmp"
CLEANED_SUFFIX = ".cleaned"  # a log cleaner's output being written (discarded on load)
SWAP_SUFFIX = ".swap"  # a complete cleaned segment about to replace its sources (finished on load)
SNAPSHOT_SUFFIX = ".snapshot"  # producer state (storage/producer_state.py)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"

_OFFSET_DIGITS = 20

# Kafka's suffixes of a partition folder being moved in (AlterReplicaLogDirs) and one waiting to be
# deleted: `<topic>-<partition>.<uuid hex>-future` / `-delete`.
FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
MAX_FILE_NAME_BYTES = 255  # NAME_MAX of the common file systems
# In a future folder whose name was cut (moved_dir_name): the partition folder's name it becomes
PARTITION_NAME_FILE = "partition.name"


def as_path(path: str | Path) -> Path:
    """`path` as a Path; one already is kept (Path(path) parses it again: thousands of new logs
    make a handful each)."""
    return path if isinstance(path, Path) else Path(path)


def filename_prefix(base_offset: int) -> str:
    """20-digit zero-padded offset, so that names sort like offsets."""
    return f"{base_offset:0{_OFFSET_DIGITS}d}"


def log_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + LOG_SUFFIX)


def offset_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + INDEX_SUFFIX)


def time_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + TIME_INDEX_SUFFIX)


def transaction_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + TXN_INDEX_SUFFIX)


def producer_snapshot_file(directory: Path, offset: int) -> Path:
    return directory / (filename_prefix(offset) + SNAPSHOT_SUFFIX)


def parse_snapshot_file(name: str) -> int | None:
    """`00000000000000000042.snapshot` -> 42; None for any other name."""
    stem = name[: -len(SNAPSHOT_SUFFIX)] if name.endswith(SNAPSHOT_SUFFIX) else ""
    return int(stem) if len(stem) == _OFFSET_DIGITS and stem.isdigit() else None


def parse_segment_file(name: str) -> tuple[int, str] | None:
    """`00000000000000000042.log` -> (42, ".log"); None for anything that is not a segment file."""
    for suffix in SEGMENT_SUFFIXES:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            if len(stem) == _OFFSET_DIGITS and stem.isdigit():
                return int(stem), suffix
    return None


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """`my-topic-3` -> ("my-topic", 3); topics may contain '-', so split at the last one."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def moved_dir_name(stem: str, suffix: str) -> str:
    """`<stem>.<uuid hex><suffix>` for a partition folder being moved in or deleted, within the
    file systems' 255 bytes for any legal topic: a stem too long for it keeps its start and gets
    '~' and a hash of the whole ('~' is in no topic name, so such a name is known to be cut; a
    future folder's whole stem is then in its PARTITION_NAME_FILE). Kafka cuts deleted names
    only; a future log of a 249-character topic failed its whole log dir."""
    tag = uuid.uuid4().hex
    name = f"{stem}.{tag}{suffix}"
    if len(name.encode()) <= MAX_FILE_NAME_BYTES:
        return name
    digest = hashlib.sha1(stem.encode()).hexdigest()[:8]
    keep = MAX_FILE_NAME_BYTES - len(f"~{digest}.{tag}{suffix}".encode())
    return f"{stem[:keep]}~{digest}.{tag}{suffix}"


def is_cut(stem: str) -> bool:
    return "~" in stem


def parse_future_dir_name(name: str) -> str | None:
    """`t-0.<hex>-future` -> "t-0" (the partition folder's name); None for any other name."""
    return _strip(name, FUTURE_SUFFIX)


def parse_delete_dir_name(name: str) -> str | None:
    """`t-0.<hex>-delete` -> "t-0"; None for any other name."""
    return _strip(name, DELETE_SUFFIX)


def _strip(name: str, suffix: str) -> str | None:
    if not name.endswith(suffix):
        return None
    stem, dot, tag = name[: -len(suffix)].rpartition(".")
    if not dot or len(tag) != 32 or not all(c in "0123456789abcdef" for c in tag):
        return None
    return stem
