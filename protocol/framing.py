"""Length-prefixed frames: bytes from a socket in, whole frames out (sans-I/O).

Wire grammar: frame = int32 length (big-endian, signed, not counting itself), length bytes.
A negative or oversized length is rejected before anything is allocated for it.
"""

from __future__ import annotations

import struct

from protocol.errors import ProtocolDecodeError

_LEN = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 104_857_600  # 100 MiB, like clients' receive limits
LARGE_FRAME_BYTES = 1 << 20


class InvalidFrame(ProtocolDecodeError):
    """A frame length that can never be valid (negative)."""


class FrameTooLarge(ProtocolDecodeError):
    """A frame length above the decoder's limit."""


class FrameDecoder:
    """Accumulate bytes; `feed` returns every frame completed so far (payload without the length).

    A frame of LARGE_FRAME_BYTES or more is received into a buffer of its own size, allocated
    once its length is known and filled in place, and handed out as that bytearray: growing one
    buffer by each read would copy the whole frame again at every reallocation (tens of ms each
    near 100 MB, on the thread that reads)."""

    __slots__ = ("_buf", "max_frame_bytes", "_large", "_filled")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._large: bytearray | None = None  # the large frame being received
        self._filled = 0

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return self._filled if self._large is not None else len(self._buf)

    @property
    def incomplete_size(self) -> int:
        """The length of the frame being received, once its length prefix is in (else 0)."""
        if self._large is not None:
            return len(self._large)
        return _LEN.unpack_from(self._buf)[0] if len(self._buf) >= 4 else 0

    def feed(self, data: bytes) -> list[bytes | bytearray]:
        frames: list[bytes | bytearray] = []
        view = memoryview(data)
        if self._large is not None:
            view = self._fill(view, frames)
            if self._large is not None:
                return frames
        buf = self._buf
        buf += view
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if size < 0:
                raise InvalidFrame(f"negative frame length {size}")
            if size > self.max_frame_bytes:
                raise FrameTooLarge(f"frame length {size} exceeds the limit of {self.max_frame_bytes} bytes")
            if end - pos - 4 < size:
                if size >= LARGE_FRAME_BYTES:  # the rest of it goes into its own buffer
                    self._large, self._filled = bytearray(size), 0
                    with memoryview(buf) as rest:
                        self._fill(rest[pos + 4 :], frames)
                    pos = end
                break
            with memoryview(buf) as whole:  # one copy out of the buffer, not two
                frames.append(bytes(whole[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    def _fill(self, view: memoryview, frames: list[bytes | bytearray]) -> memoryview:
        """Copy into the large frame what of `view` it still lacks; the rest of `view`."""
        large = self._large
        assert large is not None
        take = min(len(large) - self._filled, len(view))
        large[self._filled : self._filled + take] = view[:take]
        self._filled += take
        if self._filled == len(large):
            frames.append(large)
            self._large = None
        return view[take:]


def encode_frame(payload: bytes) -> bytes:
    return _LEN.pack(len(payload)) + payload


def encode_frame_parts(head: bytes, parts: list) -> list:
    """One frame of `head` then `parts` (bytes and FileRegions, as `encode_response_parts` cuts
    them): the length prefix and the head joined to the first part, the rest as they are."""
    size = len(head) + sum(len(part) for part in parts)
    return [_LEN.pack(size) + head + parts[0], *parts[1:]]
