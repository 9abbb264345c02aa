"""Segment file -> pyarrow RecordBatches, column by column: one row per record, or one per batch.

Rows are built as Python lists of scalars per column and handed to Arrow once per chunk; per-batch
values (producer id, codec, CRC result...) are stored once per batch and expanded with `take`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from crc32c import crc32c

from protocol.compression_type import CODEC_NAMES
from protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    BatchHeader,
    decode_varint,
    decompress,
    read_batch_header,
)

TIMESTAMP_TYPE_NAMES = ("CreateTime", "LogAppendTime")
INT_MAX = 2**31 - 1
DIGEST_SIZE = 16
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def codec_name(codec: int) -> str:
    return CODEC_NAMES[codec] if codec < len(CODEC_NAMES) else f"unknown-{codec}"


def record_sequence(base_sequence: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap from INT_MAX to 0."""
    if base_sequence < 0:
        return -1
    if base_sequence > INT_MAX - delta:
        return delta - (INT_MAX - base_sequence) - 1
    return base_sequence + delta


def walk_batches(buf: bytes) -> Iterator[tuple[int, BatchHeader | None]]:
    """(position, header) per batch; (position, None) once for bytes that cannot be a batch.

    A torn tail (a batch cut short at the end of the file) ends the walk silently, as the broker's
    recovery would truncate it; a length that cannot be a v2 batch is reported and ends the walk.
    """
    pos, n = 0, len(buf)
    while n - pos >= LOG_OVERHEAD:
        length = _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0]
        if length < HEADER_SIZE - LOG_OVERHEAD:
            yield pos, None
            return
        if n - pos < length + LOG_OVERHEAD:
            return
        yield pos, read_batch_header(buf, pos)
        pos += length + LOG_OVERHEAD


def crc_ok(buf: bytes, pos: int, header: BatchHeader) -> bool:
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + header.size]) == header.crc


# --- one row per batch ---------------------------------------------------------------------------

BATCH_COLUMNS = (
    "broker_id", "topic", "partition", "segment", "position", "base_offset", "last_offset",
    "record_count", "size", "partition_leader_epoch", "magic", "crc_valid", "digest",
    "base_timestamp", "max_timestamp", "timestamp_type", "producer_id", "producer_epoch",
    "base_sequence", "is_transactional", "is_control", "compression",
)  # fmt: skip


def batch_rows(buf: bytes, replica: int, topic: str, partition: int, segment: int) -> dict:
    """Column lists for the batch view of one segment (no decompression: headers, CRC, digest)."""
    cols: dict[str, list] = {name: [] for name in BATCH_COLUMNS}
    for pos, header in walk_batches(buf):
        if header is None:  # unreadable length: report where, with whatever offset is there
            base = _I64.unpack_from(buf, pos)[0]
            row = (pos, base, base, 0, len(buf) - pos, -1, -1, False, b"", -1, -1, "CreateTime",
                   -1, -1, -1, False, False, "none")  # fmt: skip
        else:
            row = (
                pos, header.base_offset, header.last_offset, header.record_count, header.size,
                header.partition_leader_epoch, header.magic, crc_ok(buf, pos, header),
                hashlib.blake2b(buf[pos : pos + header.size], digest_size=DIGEST_SIZE).digest(),
                header.base_timestamp, header.max_timestamp,
                TIMESTAMP_TYPE_NAMES[header.timestamp_type], header.producer_id,
                header.producer_epoch, header.base_sequence, header.is_transactional,
                header.is_control, codec_name(header.compression),
            )  # fmt: skip
        for name, value in zip(BATCH_COLUMNS[4:], row, strict=True):
            cols[name].append(value)
    n = len(cols["position"])
    cols["broker_id"] = [replica] * n
    cols["topic"] = [topic] * n
    cols["partition"] = [partition] * n
    cols["segment"] = [segment] * n
    return cols


# --- one row per record --------------------------------------------------------------------------

RECORD_COLUMNS = (
    "broker_id", "topic", "partition", "segment", "offset", "timestamp", "timestamp_type", "key",
    "value", "headers", "producer_id", "producer_epoch", "sequence", "is_transactional",
    "is_control", "compression", "crc_valid", "key_size", "value_size",
)  # fmt: skip


class _RecordColumns:
    """Accumulates one chunk of rows; per-batch values once per batch, expanded at the end."""

    def __init__(self, wanted: set[str]) -> None:
        self.want_key = "key" in wanted
        self.want_value = "value" in wanted
        self.want_headers = "headers" in wanted
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.key_sizes: list[int] = []
        self.value_sizes: list[int] = []
        self.sequences: list[int] = []
        self.header_ends: list[int] = [0]
        self.header_keys: list[str] = []
        self.header_values: list[bytes | None] = []
        self.batch_index: list[int] = []  # row -> index into self.batches
        self.batches: list[tuple] = []  # (ts type, pid, epoch, txn, control, codec, crc_valid)

    def __len__(self) -> int:
        return len(self.offsets)

    def add_batch(self, buf: bytes, pos: int, header: BatchHeader, valid: bool) -> None:
        b = len(self.batches)
        self.batches.append((
            TIMESTAMP_TYPE_NAMES[header.timestamp_type], header.producer_id, header.producer_epoch,
            header.is_transactional, header.is_control, codec_name(header.compression), valid,
        ))  # fmt: skip
        start = len(self.offsets)
        try:
            blob = buf[pos + RECORDS_OFFSET : pos + header.size]
            if header.compression:
                blob = decompress(header.compression, blob)
            self._records(blob, header)
        except Exception:  # a corrupt batch: keep one row that says so, drop its partial rows
            if valid:
                raise
            self._truncate(start)
            self._row(header.base_offset, header.base_timestamp, None, None, -1)
            self.header_ends.append(len(self.header_keys))
        self.batch_index.extend([b] * (len(self.offsets) - start))

    def _row(self, offset, ts, key, value, seq) -> None:
        self.offsets.append(offset)
        self.timestamps.append(ts)
        self.keys.append(key)
        self.values.append(value)
        self.key_sizes.append(-1 if key is None else len(key))
        self.value_sizes.append(-1 if value is None else len(value))
        self.sequences.append(seq)

    def _truncate(self, n: int) -> None:
        for col in (self.offsets, self.timestamps, self.keys, self.values, self.key_sizes,
                    self.value_sizes, self.sequences):  # fmt: skip
            del col[n:]
        del self.header_ends[n + 1 :]
        del self.header_keys[self.header_ends[-1] :]
        del self.header_values[self.header_ends[-1] :]

    def _records(self, data: bytes, header: BatchHeader) -> None:
        # The record grammar (protocol.records) with varints decoded inline: this loop is the
        # pipeline's hot path, and a function call per varint would double its cost.
        base_offset, base_seq = header.base_offset, header.base_sequence
        base_ts = header.base_timestamp
        append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
        want_key, want_value, want_headers = self.want_key, self.want_value, self.want_headers
        offsets, timestamps, keys, values = self.offsets, self.timestamps, self.keys, self.values
        key_sizes, value_sizes, sequences = self.key_sizes, self.value_sizes, self.sequences
        header_ends, hkeys, hvalues = self.header_ends, self.header_keys, self.header_values
        pos = 0
        for _ in range(header.record_count):
            fields = []
            end = -1
            for i in range(3):  # length, attributes-skipped timestamp delta, offset delta
                b = data[pos]
                pos += 1
                if b < 0x80:
                    v = (b >> 1) ^ -(b & 1)
                else:
                    z, shift = b & 0x7F, 7
                    while True:
                        b = data[pos]
                        pos += 1
                        z |= (b & 0x7F) << shift
                        if b < 0x80:
                            break
                        shift += 7
                    v = (z >> 1) ^ -(z & 1)
                fields.append(v)
                if i == 0:
                    end = pos + v
                    pos += 1  # record attributes: unused by Kafka
            _, ts_delta, off_delta = fields
            # Every length and count is checked against the record's end before it moves `pos`
            # (as protocol.records does): a negative one would walk backwards forever.
            if end > len(data) or end < pos:
                raise ValueError(f"record at offset delta {off_delta} has length past its batch")
            klen, pos = decode_varint(data, pos)
            if klen < -1 or klen > end - pos:
                raise ValueError(f"record at offset delta {off_delta}: key length {klen}")
            key = None if klen < 0 else (data[pos : pos + klen] if want_key else b"")
            pos += max(klen, 0)
            vlen, pos = decode_varint(data, pos)
            if vlen < -1 or vlen > end - pos:
                raise ValueError(f"record at offset delta {off_delta}: value length {vlen}")
            value = None if vlen < 0 else (data[pos : pos + vlen] if want_value else b"")
            pos += max(vlen, 0)
            nheaders, pos = decode_varint(data, pos)
            if nheaders < 0 or nheaders > (end - pos) // 2:
                raise ValueError(f"record at offset delta {off_delta}: {nheaders} headers")
            for _ in range(nheaders):
                hklen, pos = decode_varint(data, pos)
                if hklen < 0 or hklen > end - pos:
                    raise ValueError(f"record at offset delta {off_delta}: header key length {hklen}")
                hkey = data[pos : pos + hklen]
                pos += hklen
                hvlen, pos = decode_varint(data, pos)
                if hvlen < -1 or hvlen > end - pos:
                    raise ValueError(
                        f"record at offset delta {off_delta}: header value length {hvlen}")
                if want_headers:
                    hkeys.append(hkey.decode())
                    hvalues.append(None if hvlen < 0 else data[pos : pos + hvlen])
                pos += max(hvlen, 0)
            if pos != end:
                raise ValueError(f"record at offset delta {off_delta} overruns its length")
            header_ends.append(len(hkeys))
            offsets.append(base_offset + off_delta)
            timestamps.append(base_ts + ts_delta if append_time is None else append_time)
            keys.append(key)
            values.append(value)
            key_sizes.append(klen)
            value_sizes.append(vlen)
            sequences.append(record_sequence(base_seq, off_delta))


def _record_batch(
    chunk: _RecordColumns, schema: pa.Schema, const: dict[str, object]
) -> pa.RecordBatch:
    n = len(chunk)
    take = pa.array(np.asarray(chunk.batch_index, dtype=np.int32))
    per_batch = list(zip(*chunk.batches, strict=True)) if chunk.batches else [()] * 7
    batch_names = ("timestamp_type", "producer_id", "producer_epoch", "is_transactional",
                   "is_control", "compression", "crc_valid")  # fmt: skip
    arrays: list[pa.Array] = []
    for field in schema:
        name = field.name
        if name in const:
            arrays.append(pa.array([const[name]] * n, field.type))
        elif name in batch_names:
            small = pa.array(per_batch[batch_names.index(name)], field.type)
            arrays.append(small.take(take))
        elif name == "timestamp":
            micros = np.asarray(chunk.timestamps, dtype=np.int64) * 1000
            arrays.append(pa.array(micros, pa.int64()).cast(field.type))
        elif name == "headers":
            entries = pa.StructArray.from_arrays(
                [pa.array(chunk.header_keys, pa.string()),
                 pa.array(chunk.header_values, pa.binary())],
                fields=list(field.type.value_type),
            )  # fmt: skip
            offsets = pa.array(np.asarray(chunk.header_ends, dtype=np.int32))
            arrays.append(pa.ListArray.from_arrays(offsets, entries, type=field.type))
        else:
            source = {"offset": chunk.offsets, "key": chunk.keys, "value": chunk.values,
                      "sequence": chunk.sequences, "key_size": chunk.key_sizes,
                      "value_size": chunk.value_sizes}[name]  # fmt: skip
            arrays.append(pa.array(source, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def record_batches(
    buf: bytes,
    schema: pa.Schema,
    const: dict[str, object],
    chunk_rows: int = 16_384,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of about `chunk_rows` rows for one segment, restricted to `schema`'s columns.

    `const` holds the per-segment columns (broker_id, topic, partition, segment).
    """
    wanted = set(schema.names)
    chunk = _RecordColumns(wanted)
    for pos, header in walk_batches(buf):
        if header is None:
            break  # the batch view reports unreadable bytes; records cannot be located past them
        chunk.add_batch(buf, pos, header, crc_ok(buf, pos, header))
        if len(chunk) >= chunk_rows:
            yield _record_batch(chunk, schema, const)
            chunk = _RecordColumns(wanted)
    if len(chunk):
        yield _record_batch(chunk, schema, const)


def segment_constants(replica: int, topic: str, partition: int, segment: int) -> dict[str, object]:
    return {"broker_id": replica, "topic": topic, "partition": partition, "segment": segment}

