"""Record batch format v2 (magic 2): the 61-byte header, CRC-32C, validation, and record encode/decode.

Batches stay bytes on the broker's hot path; records are decoded only for tests, internal topics and
the pipeline. No asyncio, no sockets.
"""

# Wire grammar (all integers big-endian; "varint"/"varlong" are zigzag, protobuf-style):
#
#   RecordBatch =>
#     baseOffset            int64   broker overwrites with the partition's next offset
#     batchLength           int32   bytes after this field (= batch size - 12)
#     partitionLeaderEpoch  int32   broker stamps the leader epoch
#     magic                 int8    2
#     crc                   uint32  CRC-32C of attributes .. end of batch
#     attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
#                                   6 delete horizon
#     lastOffsetDelta       int32
#     baseTimestamp         int64   first record's timestamp
#     maxTimestamp          int64   largest timestamp, or the append time with LogAppendTime
#     producerId            int64
#     producerEpoch         int16
#     baseSequence          int32
#     recordCount           int32
#     records               Record * recordCount, compressed as one blob when codec != 0
#
#   Record =>
#     length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
#     keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
#     headerCount varint, [headerKeyLength varint, headerKey utf8,
#                          headerValueLength varint (-1 = null), headerValue] * headerCount

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from protocol.checksum import crc32c
from protocol.compression import MAX_DECOMPRESSED_BYTES as MAX_DECOMPRESSED_BYTES
from protocol.compression import compress, decompress
from protocol.compression import decompression_limit as decompression_limit
from protocol.compression_type import (
    GZIP as GZIP,  # re-exported: codecs are part of the batch format
)
from protocol.compression_type import LZ4 as LZ4
from protocol.compression_type import NO_COMPRESSION as NO_COMPRESSION
from protocol.compression_type import SNAPPY as SNAPPY
from protocol.compression_type import ZSTD as ZSTD
from protocol.errors import ErrorCode, KafkaError

# One struct for the whole header; field order is the wire order above.
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER_STRUCT.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: what precedes the length-counted part

BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
MIN_BATCH_LENGTH = 14  # the smallest length any magic's batch can have (Kafka's RECORD_OVERHEAD_V0)
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORD_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

MAGIC_V2 = 2
CREATE_TIME, LOG_APPEND_TIME = 0, 1
NO_TIMESTAMP = -1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


@dataclass(slots=True)
class BatchHeader:
    """A record batch's header (magic 2), as on the wire."""
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


@dataclass(slots=True)
class Record:
    """One record of a batch, its offset and timestamp made absolute."""
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Unpack the 61-byte header at pos (no validation beyond having the bytes)."""
    if len(buf) - pos < HEADER_SIZE:
        raise _corrupt(f"need {HEADER_SIZE} header bytes at {pos}, have {len(buf) - pos}")
    return BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))


def batch_crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """True when the stored CRC-32C matches bytes attributes .. end of batch."""
    end = pos + header.size
    if end > len(buf):
        return False
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]) == header.crc


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) per complete batch; an incomplete trailing batch ends the walk.

    A length that cannot be a v2 batch raises CORRUPT_MESSAGE: nothing after it can be located.
    """
    pos, n = 0, len(buf)
    while n - pos >= LOG_OVERHEAD:
        length = _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0]
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise _corrupt(f"batch length {length} at position {pos}")
        if n - pos < length + LOG_OVERHEAD:
            return
        yield pos, BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))
        pos += length + LOG_OVERHEAD


def first_batch_header(buf: bytes | bytearray | memoryview | None) -> BatchHeader | None:
    """The header of the first complete batch, None when there is none or it cannot be read
    (what Produce v3+ looks at: one batch per partition is all it allows; the log refuses an
    unreadable one with CORRUPT_MESSAGE)."""
    try:
        first = next(iter_batches(buf or b""), None)
    except KafkaError:
        return None
    return None if first is None else first[1]


def validate_produce_records(
    buf: bytes | bytearray | memoryview, max_message_bytes: int
) -> list[BatchHeader]:
    """Check a Produce request's records as Kafka's LogValidator does; return the batch headers.

    Order per batch follows Kafka: magic, framing, size limit, CRC, then record count/offset range.
    Bytes after a whole batch that are too few for the next one are left out, as Kafka's batch
    iterator and trimInvalidBytes leave them: the caller appends the batches returned only.
    """
    headers: list[BatchHeader] = []
    pos, n = 0, len(buf)
    while pos < n:
        if headers and _partial_tail(buf, pos):
            break
        if n - pos <= MAGIC_OFFSET:
            raise _corrupt(f"torn batch at position {pos}: {n - pos} bytes")
        magic = buf[pos + MAGIC_OFFSET]
        if magic < MAGIC_V2:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"magic {magic} not supported"
            )
        if magic > MAGIC_V2:
            raise _corrupt(f"unknown magic {magic}")
        if n - pos < HEADER_SIZE:
            raise _corrupt(f"torn batch header at position {pos}")
        header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise _corrupt(f"batch length {header.batch_length} is smaller than a header")
        if header.size > n - pos:
            raise _corrupt(f"torn batch: length {header.size}, {n - pos} bytes left")
        if header.size > max_message_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {header.size} bytes exceeds max.message.bytes {max_message_bytes}",
            )
        if not batch_crc_ok(buf, pos, header):
            raise _corrupt(f"CRC mismatch in batch at position {pos}")
        if header.record_count < 1:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"record count {header.record_count}")
        if header.last_offset_delta != header.record_count - 1:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"lastOffsetDelta {header.last_offset_delta} inconsistent with "
                f"record count {header.record_count}",
            )
        headers.append(header)
        pos += header.size
    if not headers:
        raise _corrupt("no record batches")
    return headers


def _partial_tail(buf: bytes | bytearray | memoryview, pos: int) -> bool:
    """Whether the bytes at `pos` are the start of a batch cut short (Kafka's
    ByteBufferLogInputStream.nextBatch answering null); a length or magic no batch can have is
    left to the checks (CORRUPT_MESSAGE)."""
    left = len(buf) - pos
    if left < LOG_OVERHEAD:
        return True
    length = _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0]
    if length < MIN_BATCH_LENGTH:
        return False
    if left <= MAGIC_OFFSET:
        return True
    return buf[pos + MAGIC_OFFSET] <= MAGIC_V2 and left < length + LOG_OVERHEAD


def assign_offsets(buf: bytearray, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Stamp baseOffset and partitionLeaderEpoch in place; both sit outside the CRC."""
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)


def set_max_timestamp(buf: bytearray, pos: int, timestamp_type: int, ts: int) -> None:
    """Set the batch's timestamp type and maxTimestamp and recompute the CRC (both are covered)
    (Kafka's setMaxTimestamp)."""
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0] & ~TIMESTAMP_TYPE_MASK
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | (
        TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0))
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts)
    end = pos + LOG_OVERHEAD + _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0]
    _U32.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]))


# --- zigzag varints -------------------------------------------------------------------------------


def zigzag_encode(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def zigzag_decode(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


def encode_varint(n: int) -> bytes:
    """Zigzag varint/varlong bytes for n."""
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    if z < 0x80:
        return bytes((z,))
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def size_of_varint(n: int) -> int:
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (z.bit_length() + 6) // 7)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at pos; return (value, next position)."""
    b = buf[pos]
    if b < 0x80:  # one byte: the common case for lengths, deltas and counts
        return (b >> 1) ^ -(b & 1), pos + 1
    z, shift = b & 0x7F, 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift > 63:
            raise _corrupt("varint longer than 10 bytes")


# --- records --------------------------------------------------------------------------------------


# The smallest record: length, attributes, timestamp delta, offset delta, key length, value length
# and header count, one byte each. The smallest header: key length and value length.
MIN_RECORD_SIZE = 7
MIN_HEADER_SIZE = 2


def _invalid(message: str) -> KafkaError:
    """Kafka's InvalidRecordException: a record that cannot be read out of a CRC-valid batch."""
    return KafkaError(ErrorCode.INVALID_RECORD, message)


def _length(value: int, pos: int, end: int, what: str) -> int:
    """Check a varint length read at pos against the record's end; return the bytes it spans
    (any negative length is null, as Kafka's readBytes reads it)."""
    if value > end - pos:
        raise _invalid(f"Found invalid record structure: {what} length {value} runs past the "
                       f"record's end ({end - pos} bytes left)")
    return max(value, 0)


def _header_key_length(value: int, pos: int, end: int) -> int:
    if value < 0:
        raise _invalid(f"Invalid negative header key size {value}")
    return _length(value, pos, end, "header key")


def _decode_records(data: bytes, count: int, base_offset: int, base_ts: int) -> list[Record]:
    """Decode `count` records; every length and count is checked against the bytes left in its
    record before it is used, so a hostile batch fails (INVALID_RECORD, as Kafka's
    DefaultRecord.readFrom) in time and memory linear in len(data)."""
    n = len(data)
    if count < 0 or count > n // MIN_RECORD_SIZE:
        raise _invalid(f"Found invalid record structure: {count} records cannot fit in {n} bytes")
    records: list[Record] = []
    append = records.append
    pos = 0
    try:
        for _ in range(count):
            length, pos = decode_varint(data, pos)
            end = pos + length
            if length < MIN_RECORD_SIZE - 1 or end > n:
                raise _invalid(f"Invalid record size {length} at position {pos} "
                               f"({n - pos} bytes left)")
            pos += 1  # record attributes: unused
            ts_delta, pos = decode_varint(data, pos)
            off_delta, pos = decode_varint(data, pos)
            klen, pos = decode_varint(data, pos)
            size = _length(klen, pos, end, "key")
            key = None if klen < 0 else data[pos : pos + size]
            pos += size
            vlen, pos = decode_varint(data, pos)
            size = _length(vlen, pos, end, "value")
            value = None if vlen < 0 else data[pos : pos + size]
            pos += size
            nheaders, pos = decode_varint(data, pos)
            if nheaders < 0 or nheaders > (end - pos) // MIN_HEADER_SIZE:
                raise _invalid(f"Found invalid number of record headers {nheaders}")
            headers: list[tuple[str, bytes | None]] = []
            for _ in range(nheaders):
                hklen, pos = decode_varint(data, pos)
                size = _header_key_length(hklen, pos, end)
                hkey = data[pos : pos + size].decode(errors="replace")  # as Java's new String
                pos += size
                hvlen, pos = decode_varint(data, pos)
                size = _length(hvlen, pos, end, "header value")
                headers.append((hkey, None if hvlen < 0 else data[pos : pos + size]))
                pos += size
            if pos != end:
                raise _invalid(f"Invalid record size: expected to read {length} bytes in record "
                               f"payload, but instead read {pos - (end - length)}")
            append(Record(base_offset + off_delta, base_ts + ts_delta, key, value, headers))
    except (IndexError, UnicodeDecodeError) as exc:
        raise _invalid(f"Found invalid record structure: {exc}") from exc
    if pos != n:  # more records than the batch declares (Kafka's iterator refuses them too)
        raise _invalid(f"Incorrect declared batch size, records still remaining in file: "
                       f"{n - pos} bytes after the {count} records declared")
    return records


@dataclass(slots=True)
class RecordsSummary:
    """What reading a batch's records found that its header does not say."""
    max_timestamp: int  # the records' largest (NO_TIMESTAMP for none): the batch's maxTimestamp
    offsets_in_order: bool  # record i's offset delta is i


def walk_records(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader,
                       max_decompressed: int = MAX_DECOMPRESSED_BYTES) -> RecordsSummary:
    """The batch at `pos` holds exactly the records its header declares, each one readable
    (Kafka's LogValidator reads every record with DefaultRecord.readFrom): INVALID_RECORD
    otherwise. A compressed batch is inflated first, up to `max_decompressed`. The walk reads
    every length and count but copies no key, value or header: a batch declaring two billion
    records over one, or a record our own reader would refuse, never reaches the log."""
    blob: bytes | bytearray | memoryview = memoryview(buf)[pos + RECORDS_OFFSET : pos + header.size]
    if header.compression and blob:
        blob = decompress(header.compression, bytes(blob), max_decompressed)
    n, at, count = len(blob), 0, header.record_count
    if count > n // MIN_RECORD_SIZE:
        raise _invalid(f"Incorrect declared batch size: {count} records cannot fit in {n} bytes")
    max_delta, in_order = None, True
    # Each field's varint read inline when it is one byte (nearly always): a call per field
    # would double the walk's cost.
    try:
        for index in range(count):
            length, at = decode_varint(blob, at)
            end = at + length
            if length < MIN_RECORD_SIZE - 1 or end > n:
                raise _invalid(f"Incorrect declared batch size, premature EOF reached at record "
                               f"{index} of {count}")
            start = at
            b = blob[at + 1]  # after the attributes: the timestamp delta
            if b < 0x80:
                delta, at = (b >> 1) ^ -(b & 1), at + 2
            else:
                delta, at = decode_varint(blob, at + 1)
            if max_delta is None or delta > max_delta:
                max_delta = delta
            b = blob[at]  # the offset delta
            if b < 0x80:
                delta, at = (b >> 1) ^ -(b & 1), at + 1
            else:
                delta, at = decode_varint(blob, at)
            if delta != index:
                in_order = False
            for what in ("key", "value"):
                b = blob[at]
                if b < 0x80:
                    size, at = (b >> 1) ^ -(b & 1), at + 1
                else:
                    size, at = decode_varint(blob, at)
                if size > 0:
                    at += _length(size, at, end, what)
            nheaders, at = decode_varint(blob, at)
            if nheaders:
                if nheaders < 0 or nheaders > (end - at) // MIN_HEADER_SIZE:
                    raise _invalid(f"Found invalid number of record headers {nheaders}")
                for _ in range(nheaders):
                    size, at = decode_varint(blob, at)
                    at += _header_key_length(size, at, end)
                    size, at = decode_varint(blob, at)
                    at += _length(size, at, end, "header value")
            if at != end:
                raise _invalid(f"Invalid record size: expected to read {length} bytes in record "
                               f"payload, but instead read {at - start}")
    except IndexError:
        raise _invalid(f"Incorrect declared batch size, premature EOF reached: {count} "
                       f"records declared") from None
    if at != n:
        raise _invalid(f"Incorrect declared batch size, records still remaining in file: "
                       f"{n - at} bytes after the {count} records declared")
    if header.timestamp_type == LOG_APPEND_TIME:  # each record's timestamp is the batch's max
        return RecordsSummary(header.max_timestamp, in_order)
    return RecordsSummary(NO_TIMESTAMP if max_delta is None
                          else max(header.base_timestamp + max_delta, NO_TIMESTAMP), in_order)


def decode_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *,
    max_decompressed: int = MAX_DECOMPRESSED_BYTES,
) -> tuple[BatchHeader, list[Record]]:
    """Decode one batch at pos into its header and records (decompressing when needed, to at most
    `max_decompressed` bytes: RECORD_LIST_TOO_LARGE beyond, see protocol/compression.py)."""
    header = read_batch_header(buf, pos)
    if header.magic != MAGIC_V2:
        raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"magic {header.magic}")
    end = pos + header.size
    if end > len(buf):
        raise _corrupt("torn batch")
    blob = bytes(memoryview(buf)[pos + RECORDS_OFFSET : end])
    if header.compression and blob:  # the log cleaner's empty batches keep their codec
        blob = decompress(header.compression, blob, max_decompressed)
    records = _decode_records(blob, header.record_count, header.base_offset, header.base_timestamp)
    if header.timestamp_type == LOG_APPEND_TIME:
        # With LogAppendTime every record's timestamp is the batch's maxTimestamp (Kafka's rule).
        for record in records:
            record.timestamp = header.max_timestamp
    return header, records


def _encode_record(
    offset_delta: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> bytes:
    body = [b"\x00", encode_varint(ts_delta), encode_varint(offset_delta)]
    for blob in (key, value):
        if blob is None:
            body.append(b"\x01")  # zigzag(-1)
        else:
            body += (encode_varint(len(blob)), blob)
    body.append(encode_varint(len(headers)))
    for hkey, hvalue in headers:
        raw = hkey.encode()
        body += (encode_varint(len(raw)), raw)
        if hvalue is None:
            body.append(b"\x01")
        else:
            body += (encode_varint(len(hvalue)), hvalue)
    payload = b"".join(body)
    return encode_varint(len(payload)) + payload


def encode_batch(
    records: Sequence[
        tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int | None]
    ],
    *,
    base_offset: int = 0,
    compression: int = NO_COMPRESSION,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = CREATE_TIME,
    snappy_xerial: bool = True,
    compression_level: int | None = None,
) -> bytes:
    """Build one v2 batch from (key, value, headers, timestamp) tuples; timestamp None means now."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    now = int(time.time() * 1000)
    stamps = [now if r[3] is None else r[3] for r in records]
    base_ts = stamps[0]
    blob = b"".join(
        _encode_record(i, ts - base_ts, key, value, headers or ())
        for i, ((key, value, headers, _), ts) in enumerate(zip(records, stamps, strict=True))
    )
    if compression:
        blob = compress(compression, blob, snappy_xerial=snappy_xerial, level=compression_level)
    attributes = (
        (compression & COMPRESSION_MASK)
        | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_MASK if is_transactional else 0)
        | (CONTROL_MASK if is_control else 0)
    )
    out = bytearray(HEADER_SIZE + len(blob))
    HEADER_STRUCT.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, MAGIC_V2, 0,
        attributes, len(records) - 1, base_ts, max(stamps), producer_id, producer_epoch,
        base_sequence, len(records),
    )  # fmt: skip
    out[HEADER_SIZE:] = blob
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def recompress_batch(buf: bytes | bytearray | memoryview, pos: int, codec: int,
                     level: int | None, max_decompressed: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """The batch at `pos` built again with `codec`, its records at offset deltas 0..n-1 (Kafka's
    LogValidator.buildRecordsAndAssignOffsets: a topic's compression.type other than the batch's,
    or a compressed batch whose inner offsets are out of order). The producer's id, epoch,
    sequence and transactional flag stay."""
    header, records = decode_batch(buf, pos, max_decompressed=max_decompressed)
    return encode_batch(
        [(r.key, r.value, r.headers, r.timestamp) for r in records], compression=codec,
        compression_level=level, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional, timestamp_type=header.timestamp_type)


def rebuild_batch(header: BatchHeader, records: Sequence[Record]) -> bytes:
    """The batch `header` with only `records` (a subset of its own), as Kafka's log cleaner writes it.

    Every header field is kept (base offset, lastOffsetDelta so that the producer's last sequence
    stands, timestamps' base, producer id/epoch/sequence, codec, epoch); record offsets and
    timestamps keep their deltas; recordCount and maxTimestamp follow the records; CRC recomputed.
    No records gives the empty batch Kafka keeps to preserve a producer's last sequence.
    """
    base_ts = header.base_timestamp
    blob = b"".join(
        _encode_record(r.offset - header.base_offset, r.timestamp - base_ts, r.key, r.value,
                       r.headers)
        for r in records
    )
    if header.compression and blob:
        blob = compress(header.compression, blob)
    max_ts = header.max_timestamp
    if header.timestamp_type != LOG_APPEND_TIME and records:
        max_ts = max(r.timestamp for r in records)
    out = bytearray(HEADER_SIZE + len(blob))
    HEADER_STRUCT.pack_into(
        out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch,
        MAGIC_V2, 0, header.attributes, header.last_offset_delta, base_ts, max_ts,
        header.producer_id, header.producer_epoch, header.base_sequence, len(records),
    )  # fmt: skip
    out[HEADER_SIZE:] = blob
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
