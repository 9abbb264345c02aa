"""Kafka-style offset checkpoint files ("0", a count, then "topic partition offset" lines).

Writes are atomic: a temp file is written and fsynced, then renamed over the old one, then the folder
is fsynced, so a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError
from storage.naming import TEMP_SUFFIX

CHECKPOINT_VERSION = 0


def malformed_checkpoint(path: Path, why: str) -> KafkaError:
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"malformed checkpoint {path}: {why}")


def fsync_dir(directory: Path) -> None:
    """Make a rename or file creation in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(path: Path, rows: Sequence[str]) -> None:
    """Kafka's checkpoint layout: a version line, a count line, then one line per entry."""
    write_text_atomically(path, "\n".join([str(CHECKPOINT_VERSION), str(len(rows)), *rows]) + "\n")


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """The entries of a checkpoint file, each split into `fields` words; None when there is no file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        raise malformed_checkpoint(path, "missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise malformed_checkpoint(path, f"unknown version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise malformed_checkpoint(path, f"bad count {lines[1]!r}") from None
    rows = [line.split() for line in lines[2:] if line.strip()]
    if len(rows) != count:
        raise malformed_checkpoint(path, f"expected {count} entries, found {len(rows)}")
    for row in rows:
        if len(row) != fields:
            raise malformed_checkpoint(path, f"bad line {' '.join(row)!r}")
    return rows


class OffsetCheckpointFile:
    """One checkpoint file mapping (topic, partition) to an offset."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_checkpoint(self.path, [f"{t} {p} {offset}" for (t, p), offset in offsets.items()])

    def read(self) -> dict[tuple[str, int], int]:
        """The stored offsets; {} when the file does not exist."""
        offsets: dict[tuple[str, int], int] = {}
        for topic, partition, offset in read_checkpoint(self.path, 3) or []:
            try:
                offsets[(topic, int(partition))] = int(offset)
            except ValueError:
                raise malformed_checkpoint(self.path, f"bad line {topic} {partition} {offset}") from None
        return offsets


def write_text_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` so that a crash leaves the old file or the new one, never a torn one."""
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
