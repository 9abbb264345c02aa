"""Kafka-style offset checkpoint files ("0", a count, then "topic partition offset" lines).

Writes are atomic: a temp file is written and fsynced, then renamed over the old one, then the folder
is fsynced, so a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError
from storage.naming import TEMP_SUFFIX

CHECKPOINT_VERSION = 0


def _malformed(path: Path, why: str) -> KafkaError:
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"malformed checkpoint {path}: {why}")


def fsync_dir(directory: Path) -> None:
    """Make a rename or file creation in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OffsetCheckpointFile:
    """One checkpoint file mapping (topic, partition) to an offset."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
        lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
        tmp = self.path.with_name(self.path.name + TEMP_SUFFIX)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)

    def read(self) -> dict[tuple[str, int], int]:
        """The stored offsets; {} when the file does not exist."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        lines = text.splitlines()
        if len(lines) < 2:
            raise _malformed(self.path, "missing version or count line")
        if lines[0].strip() != str(CHECKPOINT_VERSION):
            raise _malformed(self.path, f"unknown version {lines[0]!r}")
        try:
            count = int(lines[1])
        except ValueError:
            raise _malformed(self.path, f"bad count {lines[1]!r}") from None
        entries = [line for line in lines[2:] if line.strip()]
        if len(entries) != count:
            raise _malformed(self.path, f"expected {count} entries, found {len(entries)}")
        offsets: dict[tuple[str, int], int] = {}
        for line in entries:
            parts = line.split()
            if len(parts) != 3:
                raise _malformed(self.path, f"bad line {line!r}")
            try:
                offsets[(parts[0], int(parts[1]))] = int(parts[2])
            except ValueError:
                raise _malformed(self.path, f"bad line {line!r}") from None
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
