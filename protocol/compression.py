"""Record batch compression: the four codecs Kafka knows, through cramjam.

Snappy comes in two framings: the Java client and kafka-python write snappy-java's "xerial"
stream, librdkafka a raw block; both are read. LZ4 is the frame format with independent blocks,
which Java's reader requires.
"""

from __future__ import annotations

import struct

import cramjam

from protocol.errors import ErrorCode, KafkaError

NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

_I32 = struct.Struct(">i")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _xerial_decompress(data: bytes) -> bytes:
    """snappy-java's framing: magic, version, compat, then (int32 length, raw snappy block)*."""
    out = []
    pos = _XERIAL_HEADER.size
    n = len(data)
    while pos < n:
        (size,) = _I32.unpack_from(data, pos)
        pos += 4
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(out)


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Inflate a batch's records blob; accepts both snappy framings the clients write."""
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            data = bytes(data)
            if data.startswith(_XERIAL_MAGIC):
                return _xerial_decompress(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, ValueError, struct.error) as exc:
        raise _corrupt(f"cannot decompress codec {codec}: {exc}") from exc
    raise _corrupt(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes, *, snappy_xerial: bool = True) -> bytes:
    """Deflate a records blob the way the Java client does (xerial snappy, independent lz4 blocks)."""
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
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
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")
