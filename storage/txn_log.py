"""Framed records for append-only files: a 4-byte length, a 4-byte CRC32C of the payload, then the
payload, so that a reader finds where a crash tore the tail (ZooKeeper's txn log frames the same way).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from protocol.checksum import crc32c

FRAME_HEADER = struct.Struct(">II")  # payload length, CRC32C of the payload


@dataclass(slots=True)
class FramedFile:
    """What a file holds: its whole records, and where the first torn or corrupt one starts."""

    payloads: list[bytes]
    valid_bytes: int  # the length of the whole records; the rest is a torn tail
    total_bytes: int

    @property
    def torn(self) -> bool:
        return self.valid_bytes < self.total_bytes


def frame(payload: bytes) -> bytes:
    return FRAME_HEADER.pack(len(payload), crc32c(payload)) + payload


def frames(payloads: Iterable[bytes]) -> bytes:
    return b"".join(frame(p) for p in payloads)


def parse_frames(buf: bytes) -> FramedFile:
    """Every whole record from the start of `buf` up to the first short or CRC-failing one."""
    view, pos, payloads = memoryview(buf), 0, []
    while pos + FRAME_HEADER.size <= len(buf):
        length, crc = FRAME_HEADER.unpack_from(buf, pos)
        end = pos + FRAME_HEADER.size + length
        if end > len(buf):
            break
        payload = bytes(view[pos + FRAME_HEADER.size : end])
        if crc32c(payload) != crc:
            break
        payloads.append(payload)
        pos = end
    return FramedFile(payloads, pos, len(buf))


def read_frames(path: Path) -> FramedFile:
    """The records of `path` (none when there is no file)."""
    try:
        return parse_frames(path.read_bytes())
    except FileNotFoundError:
        return FramedFile([], 0, 0)
