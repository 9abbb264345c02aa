"""construct primitives for Kafka's wire types (fixed ints, varints, strings, bytes, arrays, tagged fields), parsed and built alike interpreted or compiled.

Streams are `Reader`s (BytesIO with the end offset), so counts are checked before anything is allocated.
"""

# Wire grammar (big-endian throughout):
# int8 int16 int32 int64 uint16 uint32 float64 bool   fixed width
# uuid             16 raw bytes, all zero = "no id"; exposed as 16-byte `bytes`
# string           int16 len, utf-8 bytes; len -1 = null
# bytes, records   int32 len, raw bytes; len -1 = null (exposed as `bytes`, one copy out of the frame)
# array            int32 count, elements; count -1 = null
# compact_*        uvarint (len or count + 1), then as above; 0 = null
# uvarint          7 bits per byte, least significant group first, high bit = more; at most 5 bytes
# nullable struct  int8 -1 = null, 1 = present, then the struct
# tagged section   uvarint count, count x (uvarint tag, uvarint size, size bytes); tags ascending

from __future__ import annotations

import io as _io
import struct
from typing import Any

from construct import Construct, ConstructError, StreamError

from protocol.file_region import FileRegion

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
CONSTS: list[Any] = []  # objects that compiled code refers to by index


def const(obj: Any) -> int:
    """Register `obj` so generated source can refer to it as CONSTS[i]."""
    CONSTS.append(obj)
    return len(CONSTS) - 1


class Reader(_io.BytesIO):
    """BytesIO that knows its end, so readers can check lengths before allocating, and how many
    array elements the parse may still make (each costs far more memory than its wire bytes)."""

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0,
                 max_elements: int | None = None) -> None:
        super().__init__(data)
        self.end = len(data)
        self.elements_left = self.end if max_elements is None else max_elements
        if offset:
            self.seek(offset)


class TooManyElements(StreamError):
    """A parse would make more array elements than its budget allows."""


def remaining(io: Reader) -> int:
    return io.end - io.tell()


# ---- readers and writers shared by the interpreted and the compiled forms ----


def read_exact(io: Any, n: int) -> bytes:
    data = io.read(n)
    if len(data) != n:
        raise StreamError(f"needed {n} bytes, only {len(data)} left")
    return data


def read_uvarint(io: Any) -> int:
    b = io.read(1)
    if b and b[0] < 0x80:
        return b[0]
    value = shift = 0
    for _ in range(5):
        if not b:
            raise StreamError("truncated unsigned varint")
        byte = b[0]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
        b = io.read(1)
    raise StreamError("unsigned varint longer than 5 bytes")


def write_uvarint(io: Any, value: int) -> None:
    if not 0 <= value <= 0xFFFFFFFF:
        raise StreamError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    io.write(out)


def _bad_length(n: int, nullable: bool, what: str) -> None:
    """None for a legal null, else raise: negative lengths other than a nullable field's -1."""
    if n == -1 and nullable:
        return None
    raise StreamError(f"invalid {what} {n}" + (" (null in a non-nullable field)" if n == -1 else ""))


def _short(n: int, got: int, what: str) -> StreamError:
    return StreamError(f"{what} {n} exceeds the {got} bytes left")


def _text(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise StreamError(f"invalid utf-8 in string: {e}") from None


def _len16(io: Any) -> int:
    b = io.read(2)
    if len(b) != 2:
        raise StreamError("truncated int16 length")
    return _I16.unpack(b)[0]


def _len32(io: Any) -> int:
    b = io.read(4)
    if len(b) != 4:
        raise StreamError("truncated int32 length")
    return _I32.unpack(b)[0]


def _ulen(io: Any) -> int:
    return read_uvarint(io) - 1


def _reader(length: Any, what: str, text: bool) -> Any:
    """Strings and bytes: BytesIO.read(n) never allocates more than what is left; check after."""

    def read(io: Any, nullable: bool) -> Any:
        n = length(io)
        if n < 0:
            return _bad_length(n, nullable, what)
        data = io.read(n)
        if len(data) != n:
            raise _short(n, len(data), what)
        return _text(data) if text else data

    return read


def _counter(length: Any, what: str) -> Any:
    """Arrays: the count is checked against the bytes left before any element is read."""

    def read(io: Any, nullable: bool) -> int | None:
        n = length(io)
        if n < 0:
            return _bad_length(n, nullable, what)
        if n > io.end - io.tell():
            raise _short(n, io.end - io.tell(), what)
        io.elements_left -= n
        if io.elements_left < 0:
            raise TooManyElements(f"{what} {n}: more array elements than a request may hold")
        return n

    return read


def _writer(null: bytes, length: Any, text: bool | None) -> Any:
    """text True: encode a str; False: write bytes; None: only the count of a sequence."""

    def write(io: Any, value: Any, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise StreamError("None given for a non-nullable field")
            io.write(null)
        elif text is None:
            length(io, len(value))
        elif text:
            data = value.encode()
            length(io, len(data))
            io.write(data)
        else:
            length(io, len(value))
            if type(value) is FileRegion:
                _write_region(io, value)
            else:
                io.write(value)

    return write


def _write_region(io: Any, region: FileRegion) -> None:
    """Record bytes left in their file: a stream collecting regions (`encode_response_parts`) keeps
    the place; any other gets the bytes read from the file."""
    regions = getattr(io, "regions", None)
    if regions is not None:
        regions.append((io.tell(), region))
        return
    data = region.read()
    if len(data) != len(region):
        raise StreamError(f"{region} was truncated under the response")
    io.write(data)


def _pack16(io: Any, n: int) -> None:
    io.write(_I16.pack(n))


def _pack32(io: Any, n: int) -> None:
    io.write(_I32.pack(n))


def _packu(io: Any, n: int) -> None:
    write_uvarint(io, n + 1)


read_string = _reader(_len16, "string length", True)
read_cstring = _reader(_ulen, "compact string length", True)
read_bytes = _reader(_len32, "bytes length", False)
read_cbytes = _reader(_ulen, "compact bytes length", False)
read_count = _counter(_len32, "array count")
read_ccount = _counter(_ulen, "compact array count")
write_string = _writer(b"\xff\xff", _pack16, True)
write_cstring = _writer(b"\x00", _packu, True)
write_bytes = _writer(b"\xff\xff\xff\xff", _pack32, False)
write_cbytes = _writer(b"\x00", _packu, False)
write_count = _writer(b"\xff\xff\xff\xff", _pack32, None)
write_ccount = _writer(b"\x00", _packu, None)
for _name, _fn in list(globals().items()):  # generated code imports these by name
    if _name.startswith(("read_", "write_")):
        _fn.__name__ = _name


def read_tagged(
    io: Any, result: dict, table: dict[int, tuple[str, Any]], defaults: tuple, first: bytes | None = None
) -> None:
    """Read a tagged section into `result`; known tags parse with table[tag] = (name, parse(io)),
    unknown tags are skipped; known tags that are absent take their default (name, factory).
    `first`: the section's first byte when the caller already read it (fast path for b"\\x00")."""
    if first is not None:
        if not first:
            raise StreamError("truncated tagged fields section")
        io.seek(-1, 1)
    count = read_uvarint(io)
    if count > remaining(io):
        raise StreamError(f"tagged field count {count} exceeds the bytes left")
    for _ in range(count):
        tag = read_uvarint(io)
        size = read_uvarint(io)
        if size > remaining(io):
            raise _short(size, remaining(io), f"tagged field {tag} size")
        entry = table.get(tag)
        if entry is None:
            io.seek(size, 1)
        else:
            result[entry[0]] = entry[1](Reader(io.read(size)))
    for name, factory in defaults:
        if name not in result:
            result[name] = factory()


def fill_defaults(result: dict, defaults: tuple) -> None:
    for name, factory in defaults:
        result[name] = factory()


def tag_payload(build: Any, obj: Any, this: Any) -> bytes:
    out = _io.BytesIO()
    build(obj, out, this)
    return out.getvalue()


def write_tagged(io: Any, tags: list[tuple[int, bytes]]) -> None:
    write_uvarint(io, len(tags))
    for tag, payload in tags:
        write_uvarint(io, tag)
        write_uvarint(io, len(payload))
        io.write(payload)


def is_default(value: Any, default: Any) -> bool:
    if value is default or value == default:
        return True
    return isinstance(default, tuple) and isinstance(value, list) and tuple(value) == default


def add_path(e: ConstructError, step: str) -> None:
    """Record where a decode failed, innermost step first on the way out."""
    steps = getattr(e, "kafka_path", None)
    if steps is None:
        steps = e.kafka_path = []
    steps.insert(0, step)


# ---- construct classes ----


def emit_packer(code: Any, fmt: str) -> str:
    """Declare a struct.Struct for `fmt` in generated source; return its name."""
    name = "fixed_" + fmt.replace("?", "Z")
    code.append(f"{name} = struct.Struct('>{fmt}')")
    return name


class Fixed(Construct):
    """A fixed-width field packed with `struct` (format char `fmt`, big-endian)."""

    def __init__(self, fmt: str) -> None:
        super().__init__()
        self.fmt = fmt
        self.packer = struct.Struct(">" + fmt)
        self.size = self.packer.size

    def _parse(self, stream, context, path):
        return self.packer.unpack(read_exact(stream, self.size))[0]

    def _build(self, obj, stream, context, path):
        try:
            stream.write(self.packer.pack(obj))
        except struct.error as e:
            raise StreamError(f"cannot pack {obj!r} as {self.fmt}: {e}") from None
        return obj

    def _sizeof(self, context, path):
        return self.size

    def _emitparse(self, code):
        return f"{emit_packer(code, self.fmt)}.unpack(io.read({self.size}))[0]"

    def _emitbuild(self, code):
        return f"io.write({emit_packer(code, self.fmt)}.pack(obj))"


class _Call(Construct):
    """A field read and written by one shared function pair, with a `nullable` flag."""

    reader: Any
    writer: Any

    def __init__(self, nullable: bool) -> None:
        super().__init__()
        self.nullable = nullable

    def _parse(self, stream, context, path):
        return type(self).reader(stream, self.nullable)

    def _build(self, obj, stream, context, path):
        type(self).writer(stream, obj, self.nullable)
        return obj

    def _emitparse(self, code):
        code.append(f"from protocol.types import {self.reader.__name__}")
        return f"{self.reader.__name__}(io, {self.nullable})"

    def _emitbuild(self, code):
        code.append(f"from protocol.types import {self.writer.__name__}")
        return f"{self.writer.__name__}(io, obj, {self.nullable})"


class String(_Call):
    reader, writer = read_string, write_string


class CompactString(_Call):
    reader, writer = read_cstring, write_cstring


class Bytes(_Call):
    reader, writer = read_bytes, write_bytes


class CompactBytes(_Call):
    reader, writer = read_cbytes, write_cbytes


UUID = Fixed("16s")
INT8, INT16, INT32, INT64 = Fixed("b"), Fixed("h"), Fixed("i"), Fixed("q")
UINT16, UINT32, FLOAT64, BOOL = Fixed("H"), Fixed("I"), Fixed("d"), Fixed("?")
