"""Record batch compression: the four codecs Kafka knows, through cramjam (loaded with the record
batches' module, the data path: start-up does without it).

Snappy comes in two framings: the Java client and kafka-python write snappy-java's "xerial"
stream, librdkafka a raw block; both are read. LZ4 is the frame format with independent blocks,
which Java's reader requires.
"""

from __future__ import annotations

import struct

import cramjam

from protocol.compression_type import CODEC_NAMES, GZIP, LZ4, SNAPPY, ZSTD
from protocol.errors import ErrorCode, KafkaError

_I32 = struct.Struct(">i")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version


# Decompression never inflates past a bound: a few KB of zstd or gzip can claim gigabytes.
# A batch's records may take at most 16 times the topic's max.message.bytes once inflated, and
# never less than 16 MiB (16 x the default message.max.bytes); past that the batch is refused with
# RECORD_LIST_TOO_LARGE, for that partition only. Output goes into a buffer of the bound at most,
# grown as needed, so nothing larger is ever allocated.
MAX_DECOMPRESSED_BYTES = 16 * 1024 * 1024
DECOMPRESSION_RATIO_BOUND = 16
_FIRST_OUTPUT_BYTES = 64 * 1024
_OVERFLOW = "failed to write whole buffer"  # cramjam's *_into error when the output does not fit


def decompression_limit(max_message_bytes: int) -> int:
    """The bound for a topic whose batches may be `max_message_bytes` long (compressed)."""
    return max(MAX_DECOMPRESSED_BYTES, DECOMPRESSION_RATIO_BOUND * max_message_bytes)


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _too_large(codec: int, limit: int) -> KafkaError:
    name = CODEC_NAMES[codec] if codec < len(CODEC_NAMES) else str(codec)
    return KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                      f"{name} records inflate past {limit} bytes, the decompression bound")


def _snappy_block(block: bytes, left: int, limit: int) -> bytes:
    """One raw snappy block, its declared length checked against the `left` bytes of `limit`
    before anything is allocated (a 5-byte header can claim 4 GiB)."""
    declared = cramjam.snappy.decompress_raw_len(block)
    if declared > left:
        raise _too_large(SNAPPY, limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _xerial_decompress(data: bytes, limit: int) -> bytes:
    """snappy-java's framing: magic, version, compat, then (int32 length, raw snappy block)*."""
    out = []
    pos = _XERIAL_HEADER.size
    n = len(data)
    left = limit
    while pos < n:
        if n - pos < 4:
            raise _corrupt("torn xerial snappy block length")
        (size,) = _I32.unpack_from(data, pos)
        pos += 4
        if size < 0 or size > n - pos:
            raise _corrupt(f"xerial snappy block of {size} bytes with {n - pos} left")
        block = _snappy_block(data[pos : pos + size], left, limit)
        left -= len(block)
        out.append(block)
        pos += size
    return b"".join(out)


def _bounded(module, codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """Inflate into a buffer grown 4x at a time up to `limit`; refuse what does not fit in it."""
    size = min(limit, max(_FIRST_OUTPUT_BYTES, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = module.decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _OVERFLOW not in str(exc):
                raise
            if size >= limit:
                raise _too_large(codec, limit) from None
            size = min(limit, size * 4)
            continue
        return bytes(memoryview(out)[:n])


def decompress(codec: int, data: bytes | memoryview, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """Inflate a batch's records blob (both snappy framings the clients write), at most `limit`
    bytes of it: RECORD_LIST_TOO_LARGE beyond, CORRUPT_MESSAGE when it cannot be inflated."""
    try:
        if codec == GZIP:
            return _bounded(cramjam.gzip, codec, data, limit)
        if codec == SNAPPY:
            data = bytes(data)
            if data.startswith(_XERIAL_MAGIC):
                return _xerial_decompress(data, limit)
            return _snappy_block(data, limit, limit)
        if codec == LZ4:
            return _bounded(cramjam.lz4, codec, data, limit)
        if codec == ZSTD:
            return _bounded(cramjam.zstd, codec, data, limit)
    except (cramjam.DecompressionError, ValueError, struct.error) as exc:
        raise _corrupt(f"cannot decompress codec {codec}: {exc}") from exc
    raise _corrupt(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes, *, snappy_xerial: bool = True,
             level: int | None = None) -> bytes:
    """Deflate a records blob the way the Java client does (xerial snappy, independent lz4
    blocks); `level` as Kafka's compression.<codec>.level (None or gzip's -1: the default)."""
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=6 if level in (None, -1) else level))
    if codec == SNAPPY:
        if not snappy_xerial:
            return bytes(cramjam.snappy.compress_raw(data))
        parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
        for i in range(0, max(len(data), 1), 32 * 1024):  # snappy-java's default block size
            block = bytes(cramjam.snappy.compress_raw(data[i : i + 32 * 1024]))
            parts += (_I32.pack(len(block)), block)
        return b"".join(parts)
    if codec == LZ4:
        # Java's KafkaLZ4BlockInputStream decodes blocks one by one: they must be independent.
        compressor = cramjam.lz4.Compressor(level=9 if level is None else level,
                                            content_checksum=False, block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise ValueError(f"unknown compression codec {codec}")
