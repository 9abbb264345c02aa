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

    @property
    def incomplete_size(self) -> int:
        """The length of the frame being received, once its length prefix is in (else 0)."""
        return _LEN.unpack_from(self._buf)[0] if len(self._buf) >= 4 else 0

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if size < 0:
                raise InvalidFrame(f"negative frame length {size}")
            if size > self.max_frame_bytes:
                raise FrameTooLarge(f"frame length {size} exceeds the limit of {self.max_frame_bytes} bytes")
            if end - pos - 4 < size:
                break
            with memoryview(buf) as view:  # one copy out of the buffer, not two
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames


def encode_frame(payload: bytes) -> bytes:
    return _LEN.pack(len(payload)) + payload
