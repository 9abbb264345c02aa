"""Length-prefixed frames: bytes from a socket in, whole frames out (sans-I/O).

Wire grammar: frame = int32 length (big-endian, signed, not counting itself), length bytes.
A negative or oversized length is rejected before anything is allocated for it.
"""

from __future__ import annotations

import struct

from protocol.errors import ProtocolDecodeError

_LEN = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 104_857_600  # 100 MiB, like clients' receive limits


class InvalidFrame(ProtocolDecodeError):
    """A frame length that can never be valid (negative)."""


class FrameTooLarge(ProtocolDecodeError):
    """A frame length above the decoder's limit."""


class FrameDecoder:
    """Accumulate bytes; `feed` returns every frame completed so far (payload without the length)."""

    __slots__ = ("_buf", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        self.append(data)
        frames: list[bytes] = []
        while (frame := self.next_frame()) is not None:
            frames.append(frame)
        return frames

    def append(self, data: bytes) -> None:
        """Add bytes without cutting frames (`next_frame` cuts them one at a time)."""
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The first complete frame (removed from the buffer), or None while it is incomplete.
        A bad length raises as soon as its 4 bytes are here, before anything waits for it."""
        buf = self._buf
        if len(buf) < 4:
            return None
        (size,) = _LEN.unpack_from(buf, 0)
        if size < 0:
            raise InvalidFrame(f"negative frame length {size}")
        if size > self.max_frame_bytes:
            raise FrameTooLarge(f"frame length {size} exceeds the limit of {self.max_frame_bytes} bytes")
        if len(buf) - 4 < size:
            return None
        frame = bytes(buf[4 : 4 + size])
        del buf[: 4 + size]  # a bytearray drops its head in place, without copying the rest
        return frame


def encode_frame(payload: bytes) -> bytes:
    return _LEN.pack(len(payload)) + payload
