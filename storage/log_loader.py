"""LogLoader: a partition folder's segments as found on disk, recovered after an unclean shutdown.

Stray temp files and indexes without a segment are removed; after a crash every segment from the
one holding the recovery point on is scanned batch by batch (CRC checked) and the log is cut at
the first torn or corrupt batch, later segments deleted; missing or inconsistent indexes are
rebuilt. A cleaner's swap interrupted by a crash is finished (a `.swap` file is complete: it
replaces the segments it covers) or discarded (a `.cleaned` file may be torn), as Kafka's loader does.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from protocol.errors import KafkaError
from protocol.records import iter_batches
from storage.checkpoint import fsync_dir
from storage.disk_faults import DiskFaults
from storage.file_handles import FileHandleCache
from storage.log_config import LogConfig
from storage.naming import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    TEMP_SUFFIX,
    log_file,
    parse_segment_file,
)
from storage.segment import LogSegment


def new_segment(
    directory: Path, config: LogConfig, base_offset: int, disk: DiskFaults | None = None,
    files: FileHandleCache | None = None, *, fresh: bool = False,
) -> LogSegment:
    return LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        disk=disk,
        files=files,
        fresh=fresh,
    )


def load_segments(
    directory: Path, config: LogConfig, recovery_point: int, clean_shutdown: bool,
    empty_log_start_offset: int = 0, disk: DiskFaults | None = None,
    files: FileHandleCache | None = None,
) -> list[LogSegment]:
    """The folder's segments in offset order (one empty segment for a new log)."""
    directory.mkdir(parents=True, exist_ok=True)
    bases: set[int] = set()
    index_files: list[tuple[int, Path]] = []
    for swap in sorted(p for p in directory.iterdir() if p.name.endswith(SWAP_SUFFIX)):
        finish_swap(directory, swap)
    for path in directory.iterdir():
        if path.name.endswith((TEMP_SUFFIX, CLEANED_SUFFIX)):
            path.unlink()
            continue
        parsed = parse_segment_file(path.name)
        if parsed is None:
            continue
        if parsed[1] == ".log":
            bases.add(parsed[0])
        else:
            index_files.append((parsed[0], path))
    for base, path in index_files:
        if base not in bases:
            path.unlink()  # an index whose segment is gone
    segments = [new_segment(directory, config, base, disk, files) for base in sorted(bases)]
    if not segments:
        return [new_segment(directory, config, empty_log_start_offset, disk, files)]
    recover_segments(segments, recovery_point, clean_shutdown)
    return segments


def recover_segments(segments: list[LogSegment], recovery_point: int, clean: bool) -> None:
    """Deep-scan from the segment holding the recovery point; cut everything after a bad batch."""
    first_unflushed = max(
        bisect.bisect_right([s.base_offset for s in segments], recovery_point) - 1, 0
    )
    for i, segment in enumerate(segments):
        deep = not clean and i >= first_unflushed
        if deep or not segment.indexes_sane() or not segment.load_tail():
            truncated = segment.recover()
        else:
            truncated = 0
        if truncated or (
            i + 1 < len(segments) and segment.next_offset > segments[i + 1].base_offset
        ):
            for later in segments[i + 1 :]:
                later.delete()
            del segments[i + 1 :]
            return


def finish_swap(directory: Path, swap: Path) -> None:
    """Complete a cleaner's swap: the `.swap` segment replaces every segment whose base offset lies
    in [its base, its next offset); a source whose records were all cleaned away, above that range,
    stays as it was (uncleaned but consistent: the next clean takes it again)."""
    parsed = parse_segment_file(swap.name[: -len(SWAP_SUFFIX)])
    if parsed is None or parsed[1] != ".log":
        swap.unlink()
        return
    base, next_offset = parsed[0], parsed[0]
    try:
        for _, header in iter_batches(swap.read_bytes()):
            next_offset = header.next_offset
    except KafkaError:
        pass  # cannot happen to a fsynced swap; what was walked is the range
    for path in directory.iterdir():  # sources first: a crash here just repeats this on load
        found = parse_segment_file(path.name)
        if found is not None and base <= found[0] < max(next_offset, base + 1):
            path.unlink(missing_ok=True)
    swap.replace(log_file(directory, base))
    fsync_dir(directory)
