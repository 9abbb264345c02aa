"""Message sets of message format v0 and v1 (magic 0 and 1), what Produce v0-2 carries and Fetch
v0-3 answers: read and converted to one magic-2 record batch, as Kafka 3.9's LogValidator
converts them on append (the log keeps magic 2 only), and magic-2 batches down-converted for old
consumers. No I/O here.

    MessageSet => [Offset int64, MessageSize int32, Message]
    Message v0 => Crc int32, Magic int8 (0), Attributes int8, Key bytes, Value bytes
    Message v1 => Crc int32, Magic int8 (1), Attributes int8, Timestamp int64, Key, Value

The CRC is CRC-32 (not the batches' CRC-32C) of everything after it. A compressed message (codec
in the attributes' low 3 bits) is a wrapper whose value is the compressed message set of its
inner messages. A magic-0 message has no timestamp: its record gets -1 (Kafka's NO_TIMESTAMP).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from protocol.compression import decompress
from protocol.errors import ErrorCode, KafkaError
from protocol.records import LOG_APPEND_TIME, decode_batch, encode_batch, iter_batches

_HEADER = struct.Struct(">qi")  # offset, message size
_CRC_MAGIC_ATTRS = struct.Struct(">IbB")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # magic 1: the timestamp is the broker's LogAppendTime
NO_TIMESTAMP = -1
LOG_OVERHEAD = _HEADER.size
MIN_MESSAGE_V0 = 4 + 1 + 1 + 4 + 4  # crc, magic, attributes, key and value lengths


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    magic: int
    codec: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _bytes(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise _corrupt("a message ends inside a length")
    (length,) = _I32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        return None, pos
    if length > end - pos:
        raise _corrupt(f"a message field of {length} bytes runs past the message")
    return bytes(buf[pos:pos + length]), pos + length


def _message(buf: memoryview, pos: int, end: int) -> LegacyMessage:
    """The message in buf[pos:end] (after its offset and size), its CRC checked."""
    if end - pos < MIN_MESSAGE_V0:
        raise _corrupt("a message shorter than its header")
    crc, magic, attributes = _CRC_MAGIC_ATTRS.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise _corrupt(f"magic {magic} in a message set")
    if zlib.crc32(buf[pos + 4:end]) != crc:
        raise _corrupt("a message's CRC does not match its bytes")
    at = pos + 6
    timestamp = NO_TIMESTAMP
    if magic == 1:
        if end - at < 8:
            raise _corrupt("a message v1 ends inside its timestamp")
        (timestamp,) = _I64.unpack_from(buf, at)
        at += 8
    key, at = _bytes(buf, at, end)
    value, at = _bytes(buf, at, end)
    if at != end:
        raise _corrupt("bytes left after a message's value")
    return LegacyMessage(magic, attributes & CODEC_MASK, timestamp, key, value)


def _messages(buf: memoryview) -> Iterator[LegacyMessage]:
    pos, n = 0, len(buf)
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            raise _corrupt("a message set ends inside a message header")
        _, size = _HEADER.unpack_from(buf, pos)
        pos += LOG_OVERHEAD
        if size < MIN_MESSAGE_V0 or size > n - pos:
            raise _corrupt(f"a message of size {size} with {n - pos} bytes left")
        yield _message(buf, pos, pos + size)
        pos += size


def read_message_set(data: bytes | memoryview, limit: int) -> tuple[list[LegacyMessage], int]:
    """The messages of a message set, wrappers opened (inner messages inflated at most `limit`
    bytes in all), and the codec of its wrappers (0: none). CORRUPT_MESSAGE for what cannot be
    read; RECORD_LIST_TOO_LARGE past the bound."""
    out: list[LegacyMessage] = []
    codec, left = 0, limit
    for message in _messages(memoryview(data)):
        if message.codec == 0:
            out.append(message)
            continue
        if message.value is None:
            raise _corrupt("a compressed message without a value")
        inner = decompress(message.codec, message.value, left)
        left -= len(inner)
        codec = message.codec
        for nested in _messages(memoryview(inner)):
            if nested.codec != 0:
                raise _corrupt("a compressed message inside a compressed message")
            # Kafka's v1 inner messages take their wrapper's timestamp when it is LogAppendTime;
            # producers send CreateTime wrappers, whose inner timestamps count.
            out.append(nested)
    if not out:
        raise KafkaError(ErrorCode.INVALID_RECORD, "a message set without a message")
    return out, codec


def to_record_batch(data: bytes | memoryview, limit: int) -> bytes:
    """The message set as one magic-2 batch (base offset 0, no producer), compressed with its
    wrappers' codec: what the log then validates and appends as any batch."""
    messages, codec = read_message_set(data, limit)
    return encode_batch([(m.key, m.value, (), m.timestamp) for m in messages], compression=codec)


def _encode_message(magic: int, offset: int, timestamp: int, log_append_time: bool,
                    key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(struct.pack(">bB", magic, TIMESTAMP_TYPE_BIT if log_append_time else 0))
    if magic == 1:
        body += _I64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field)) + field
    message = _U32.pack(zlib.crc32(body)) + body
    return _HEADER.pack(offset, len(message)) + message


def to_message_set(data: bytes | memoryview, magic: int) -> bytes:
    """Magic-2 batches down-converted to a message set of `magic` (Fetch v0-1: 0, v2-3: 1), as
    Kafka 3.9 down-converts for old consumers: one uncompressed message per record, at its
    offset; transaction markers left out; an incomplete trailing batch left out."""
    out = bytearray()
    view = memoryview(data)
    for pos, header in iter_batches(view):
        if header.is_control:
            continue
        appended = header.timestamp_type == LOG_APPEND_TIME
        for record in decode_batch(view, pos)[1]:
            out += _encode_message(magic, record.offset, record.timestamp, appended,
                                   record.key, record.value)
    return bytes(out)
