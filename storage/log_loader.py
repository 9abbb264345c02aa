"""LogLoader: a partition folder's segments as found on disk, recovered after an unclean shutdown.

Stray temp files and indexes without a segment are removed; after a crash every segment from the
one holding the recovery point on is scanned batch by batch (CRC checked) and the log is cut at
the first torn or corrupt batch, later segments deleted; missing or inconsistent indexes are
rebuilt.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from storage.log_config import LogConfig
from storage.naming import TEMP_SUFFIX, parse_segment_file
from storage.segment import LogSegment


def new_segment(directory: Path, config: LogConfig, base_offset: int) -> LogSegment:
    return LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
    )


def load_segments(
    directory: Path, config: LogConfig, recovery_point: int, clean_shutdown: bool,
    empty_log_start_offset: int = 0,
) -> list[LogSegment]:
    """The folder's segments in offset order (one empty segment for a new log)."""
    directory.mkdir(parents=True, exist_ok=True)
    bases: set[int] = set()
    index_files: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        if path.name.endswith(TEMP_SUFFIX):
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
    segments = [new_segment(directory, config, base) for base in sorted(bases)]
    if not segments:
        return [new_segment(directory, config, empty_log_start_offset)]
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
