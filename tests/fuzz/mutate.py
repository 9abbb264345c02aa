"""Byte-level mutations of request frames and record batches: bit flips, truncation, length fields
set to -1/-2/huge, repeated and spliced chunks, batches corrupted with their CRC fixed after."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from crc32c import crc32c

from protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE

if TYPE_CHECKING:
    from tests.fuzz.grammar import Source

# What a length or count field is most often set to by a hostile peer.
LENGTHS_16 = (b"\xff\xff", b"\xff\xfe", b"\x7f\xff", b"\x80\x00", b"\x00\x00")
LENGTHS_32 = (b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
              b"\x00\x10\x00\x00")
UVARINTS = (b"\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80",
            b"\x07", b"\x80")  # 0 (null), 2^32-1, too long, unterminated, -4 zigzag, truncated
INTERESTING = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE)
_I32 = struct.Struct(">i")
_HEADER_FIELDS = (57, 23, 8, 16, 21)  # record count, last offset delta, batch length, magic, attrs


def corrupt_batch(src: Source, batch: bytearray) -> bytearray:
    """Break a v2 batch the way a CRC check cannot see: the CRC is recomputed after most changes."""
    size = len(batch)
    what = src.int(0, 4)
    if what == 0 and size > HEADER_SIZE:  # bytes of the records (varints, lengths, the codec blob)
        for _ in range(src.int(1, 4)):
            batch[src.int(HEADER_SIZE, size - 1)] = src.pick(INTERESTING)
    elif what == 1:  # a header field set to a boundary value
        pos = src.pick(_HEADER_FIELDS)
        value = src.pick(LENGTHS_32) if pos in (57, 23, 8) else src.pick((b"\x00", b"\x03", b"\xff"))
        batch[pos:pos + len(value)] = value
        batch = batch[:size]
    elif what == 2 and size > HEADER_SIZE:  # a record varint replaced by a hostile one
        pos = src.int(HEADER_SIZE, size - 1)
        batch[pos:pos + 1] = src.pick(UVARINTS)
    elif what == 3:
        del batch[src.int(0, size - 1):]
    else:
        batch[src.int(0, size - 1)] ^= 1 << src.int(0, 7)
    if len(batch) > ATTRIBUTES_OFFSET and src.chance(85):
        batch[CRC_OFFSET:ATTRIBUTES_OFFSET] = struct.pack(
            ">I", crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return batch


def mutate_frame(src: Source, frame: bytes, pool: Sequence[bytes] = (),
                 api_keys: Sequence[int] = ()) -> bytes:
    """One to three mutations of a size-prefixed frame; the size prefix is usually fixed after,
    so the mutation reaches the header and body parsers rather than only the framing. A new
    api key in the header is one of `api_keys` or one no broker knows."""
    payload = bytearray(frame[4:])
    for _ in range(src.int(1, 3)):
        payload = _mutate_payload(src, payload, pool, api_keys or range(51))
    if src.chance(8):  # the size prefix itself
        prefix = src.pick(LENGTHS_32 + (_I32.pack(len(payload) + 1), _I32.pack(len(payload) - 1)))
        out = prefix + bytes(payload)
    else:
        out = _I32.pack(len(payload)) + bytes(payload)
    if src.chance(5):  # pipelined repeats of the same frame
        out *= src.int(2, 8)
    return out


def _mutate_payload(src: Source, payload: bytearray, pool: Sequence[bytes],
                    api_keys: Sequence[int]) -> bytearray:
    size = len(payload)
    if size == 0:
        return bytearray(src.raw(src.int(0, 16)))
    what = src.int(0, 9)
    pos = src.int(0, size - 1)
    if what == 0:
        for _ in range(src.int(1, 8)):
            payload[src.int(0, size - 1)] ^= 1 << src.int(0, 7)
    elif what == 1:
        payload[pos] = src.pick(INTERESTING)
    elif what == 2:  # an int16 length (strings, the client id at offset 8)
        at = src.pick((pos, 8, 8))
        payload[at:at + 2] = src.pick(LENGTHS_16)
    elif what == 3:  # an int32 length or count (arrays, bytes, records)
        payload[pos:pos + 4] = src.pick(LENGTHS_32)
    elif what == 4:  # a compact (uvarint) length or count
        payload[pos:pos + 1] = src.pick(UVARINTS)
    elif what == 5:
        del payload[src.int(0, size):]
    elif what == 6:  # a chunk repeated in place
        end = min(size, pos + src.int(1, 64))
        payload[pos:pos] = payload[pos:end] * src.int(1, 16)
    elif what == 7:
        del payload[pos:pos + src.int(1, 32)]
    elif what == 8 and pool:  # splice: our head, another frame's tail
        other = src.pick(pool)[4:]
        payload = payload[:pos] + other[src.int(0, len(other)):]
    elif src.chance(50):  # the header's api key
        payload[0:2] = struct.pack(">h", src.pick(api_keys) if src.chance(70)
                                   else src.pick((-1, 17, 67, 32767, -32768)))
    else:  # the header's api version
        payload[2:4] = struct.pack(">h", src.pick((-1, 0, 1, 3, 32767, -32768))
                                   if src.chance(50) else src.int(0, 20))
    return payload
