"""A slice of a log segment file standing for record bytes in a response (Kafka's FileRecords): the
connection sends it from the file with sendfile(2), so the records never pass through Python."""

from __future__ import annotations

import os


class FileRegion:
    """`size` bytes of a file from `position`, on a descriptor of its own (a dup of the segment's):
    the segment may be closed, rolled or deleted before the response goes out, and the slice must
    still read what was decided. Close it once sent; an unsent one closes when collected."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = -1  # until the dup succeeds (it may not: EMFILE), for close()
        self.fd = os.dup(fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, position={self.position}, size={self.size})"

    def read(self, start: int = 0) -> bytes:
        """Its bytes from `start` on, copied (for a connection that cannot send from the file).
        A file truncated meanwhile gives fewer: the caller checks."""
        return os.pread(self.fd, self.size - start, self.position + start)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()
