"""Turn the declared messages (protocol/messages.py) into construct structures per (api, version, kind).

A body is a `KStruct`: its fields in declaration order, then (flexible versions) the tagged section,
whose known tags appear as ordinary keys of the decoded Container. Building takes plain dicts: a
missing key takes the field's default, tagged fields equal to their default are left out.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from construct import Construct, ConstructError, Container

from protocol.message_spec import Field, Message, Versions, decode_fields
from protocol.messages import MESSAGES
from protocol.types import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    UINT16,
    UINT32,
    UUID,
    Bytes,
    CompactBytes,
    CompactString,
    Fixed,
    Reader,
    String,
    add_path,
    const,
    emit_packer,
    is_default,
    read_ccount,
    read_count,
    read_exact,
    read_tagged,
    tag_payload,
    write_ccount,
    write_count,
    write_tagged,
)

FIXED: dict[str, Fixed] = {
    "int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64, "uint16": UINT16,
    "uint32": UINT32, "float64": FLOAT64, "bool": BOOL, "uuid": UUID,
}
VARIABLE: dict[tuple[str, bool], type[Construct]] = {  # (type, compact) -> class
    ("string", False): String, ("string", True): CompactString,
    ("bytes", False): Bytes, ("bytes", True): CompactBytes,
    ("records", False): Bytes, ("records", True): CompactBytes,
}
ZERO: dict[str, Any] = {"string": "", "bytes": b"", "records": b"", "uuid": b"\x00" * 16,
                        "bool": False, "float64": 0.0}


class MessagesByKey(Mapping[tuple[int, str], Message]):
    """The request and response messages by (api_key, kind), each decoded on first use."""

    def __init__(self) -> None:
        self._entries = {(api_key, kind): (name, kind, api_key, valid, flexible, fields)
                         for name, kind, api_key, valid, flexible, fields in MESSAGES
                         if api_key is not None}
        self._decoded: dict[tuple[int, str], Message] = {}

    def __getitem__(self, key: tuple[int, str]) -> Message:
        message = self._decoded.get(key)
        if message is None:
            name, kind, api_key, valid, flexible, fields = self._entries[key]
            message = Message(name, kind, api_key, valid, flexible, decode_fields(fields))
            self._decoded[key] = message
        return message

    def get(self, key: tuple[int, str], default: Message | None = None) -> Message | None:
        # Asked for every request (its header version): a decoded message costs one dict lookup.
        message = self._decoded.get(key)
        if message is not None:
            return message
        return self[key] if key in self._entries else default

    def __iter__(self) -> Iterator[tuple[int, str]]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def name(self, key: tuple[int, str]) -> str:
        """The message's name without decoding it."""
        return self._entries[key][0]


BY_KEY = MessagesByKey()


def within(versions: Versions, version: int) -> bool:
    return versions[0] <= version <= versions[1]


class TagSpec(NamedTuple):
    tag: int
    name: str
    subcon: Construct
    default: Any  # expanded default: a field equal to it is not written
    factory: Any  # makes a fresh default for a tag absent on the wire


class KStruct(Construct):
    """Kafka struct: fields in order (name, subcon, build default), then tagged fields if flexible."""

    def __init__(self, fields: list[tuple[str, Construct, Any]], tagged: list[TagSpec] | None) -> None:
        super().__init__()
        self.fields = fields
        self.tagged = tagged  # None: not a flexible version, no tagged section

    def _parse(self, stream, context, path):
        result = Container()
        for name, subcon, _ in self.fields:
            try:
                result[name] = subcon._parsereport(stream, context, path)
            except ConstructError as e:
                add_path(e, name)
                raise
        if self.tagged is not None:
            table = {
                t.tag: (t.name, functools.partial(subcon._parsereport, context=context, path=path))
                for t in self.tagged for subcon in [t.subcon]
            }
            try:
                read_tagged(stream, result, table, self.tag_defaults)
            except ConstructError as e:
                add_path(e, "<tagged fields>")
                raise
        return result

    @functools.cached_property
    def tag_defaults(self) -> tuple[tuple[str, Any], ...]:
        return tuple((t.name, t.factory) for t in self.tagged or ())

    def _build(self, obj, stream, context, path):
        get = obj.get
        for name, subcon, default in self.fields:
            try:
                subcon._build(get(name, default), stream, context, path)
            except ConstructError as e:
                add_path(e, name)
                raise
        if self.tagged is not None:
            tags = []
            for t in self.tagged:
                value = get(t.name, t.default)
                if not is_default(value, t.default):
                    build = functools.partial(_build_into, t.subcon, context=context)
                    tags.append((t.tag, tag_payload(build, value, None)))
            write_tagged(stream, tags)
        return obj

    def _emitparse(self, code):
        n = code.allocateId()
        lines = [f"def parse_struct_{n}(io, this):", "    r = Container()"]
        for group in _groups(self.fields):
            if isinstance(group, list):
                fmt = "".join(sc.fmt for _, sc, _ in group)
                size = sum(sc.size for _, sc, _ in group)
                targets = ", ".join(f"r[{name!r}]" for name, _, _ in group)
                tail = "" if len(group) > 1 else "[0]"
                lines.append(f"    {targets} = {emit_packer(code, fmt)}.unpack(io.read({size})){tail}")
            else:
                name, subcon, _ = group
                lines.append(f"    r[{name!r}] = {subcon._compileparse(code)}")
        if self.tagged is not None:
            entries = []
            for t in self.tagged:
                code.append(f"def parse_tag_{n}_{t.tag}(io, this=None):\n    return {t.subcon._compileparse(code)}")
                entries.append(f"{t.tag}: ({t.name!r}, parse_tag_{n}_{t.tag})")
            code.append("from protocol.types import CONSTS, fill_defaults, read_tagged")
            code.append(f"tags_{n} = {{{', '.join(entries)}}}\ntag_defaults_{n} = CONSTS[{const(self.tag_defaults)}]")
            lines.append("    first = io.read(1)")
            lines.append("    if first != b'\\x00':")
            lines.append(f"        read_tagged(io, r, tags_{n}, tag_defaults_{n}, first)")
            if self.tagged:
                lines.append("    else:")
                lines.append(f"        fill_defaults(r, tag_defaults_{n})")
        lines.append("    return r")
        code.append("\n".join(lines))
        return f"parse_struct_{n}(io, this)"

    def _emitbuild(self, code):
        n = code.allocateId()
        lines = [f"def build_struct_{n}(obj, io, this):", "    get = obj.get"]
        for group in _groups(self.fields):
            if isinstance(group, list):
                fmt = "".join(sc.fmt for _, sc, _ in group)
                values = ", ".join(f"get({name!r}, {_literal(default)})" for name, _, default in group)
                lines.append(f"    io.write({emit_packer(code, fmt)}.pack({values}))")
            else:
                name, subcon, default = group
                lines.append(f"    obj = get({name!r}, {_literal(default)})")
                lines.append(f"    {subcon._compilebuild(code)}")
        if self.tagged == []:
            lines.append("    io.write(b'\\x00')")
        elif self.tagged:
            code.append("from protocol.types import CONSTS, is_default, tag_payload, write_tagged")
            lines.append("    tags = []")
            for t in self.tagged:
                code.append(f"def build_tag_{n}_{t.tag}(obj, io, this):\n    {t.subcon._compilebuild(code)}")
                code.append(f"tag_default_{n}_{t.tag} = CONSTS[{const(t.default)}]")
                lines.append(f"    obj = get({t.name!r}, tag_default_{n}_{t.tag})")
                lines.append(f"    if not is_default(obj, tag_default_{n}_{t.tag}):")
                lines.append(f"        tags.append(({t.tag}, tag_payload(build_tag_{n}_{t.tag}, obj, this)))")
            lines.append("    write_tagged(io, tags)")
        code.append("\n".join(lines))
        return f"build_struct_{n}(obj, io, this)"


class Array(Construct):
    """int32- or uvarint-counted array of `subcon` elements (count checked against bytes left)."""

    def __init__(self, subcon: Construct, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.subcon = subcon
        self.nullable = nullable
        self.count_reader = read_ccount if compact else read_count
        self.count_writer = write_ccount if compact else write_count

    def _parse(self, stream, context, path):
        n = self.count_reader(stream, self.nullable)
        if n is None:
            return None
        items = []
        sub = self.subcon
        for i in range(n):
            try:
                items.append(sub._parsereport(stream, context, path))
            except ConstructError as e:
                add_path(e, f"[{i}]")
                raise
        return items

    def _build(self, obj, stream, context, path):
        self.count_writer(stream, obj, self.nullable)
        for i, item in enumerate(obj or ()):
            try:
                self.subcon._build(item, stream, context, path)
            except ConstructError as e:
                add_path(e, f"[{i}]")
                raise
        return obj

    def _emitparse(self, code):
        fname = f"parse_array_{code.allocateId()}"
        reader = self.count_reader.__name__
        code.append(f"""
            from protocol.types import {reader}
            def {fname}(io, this):
                n = {reader}(io, {self.nullable})
                if n is None:
                    return None
                return [{self.subcon._compileparse(code)} for _ in range(n)]
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_array_{code.allocateId()}"
        writer = self.count_writer.__name__
        code.append(f"""
            from protocol.types import {writer}
            def {fname}(items, io, this):
                {writer}(io, items, {self.nullable})
                for obj in items or ():
                    {self.subcon._compilebuild(code)}
        """)
        return f"{fname}(obj, io, this)"


class NullableStruct(Construct):
    """int8 marker (-1 null, 1 present) before a struct, for struct fields with nullableVersions."""

    def __init__(self, subcon: Construct) -> None:
        super().__init__()
        self.subcon = subcon

    def _parse(self, stream, context, path):
        if read_exact(stream, 1)[0] >= 128:
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj, stream, context, path):
        stream.write(b"\xff" if obj is None else b"\x01")
        if obj is not None:
            self.subcon._build(obj, stream, context, path)
        return obj

    def _emitparse(self, code):
        fname = f"parse_nstruct_{code.allocateId()}"
        code.append(f"""
            from protocol.types import read_exact
            def {fname}(io, this):
                if read_exact(io, 1)[0] >= 128:
                    return None
                return {self.subcon._compileparse(code)}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_nstruct_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                io.write(b"\\xff" if obj is None else b"\\x01")
                if obj is not None:
                    {self.subcon._compilebuild(code)}
        """)
        return f"{fname}(obj, io, this)"


def _build_into(subcon: Construct, obj: Any, stream: Any, this: Any, context: Any) -> None:
    subcon._build(obj, stream, context, "(tagged)")


def _groups(fields: list[tuple[str, Construct, Any]]) -> list[Any]:
    """Runs of consecutive fixed-width fields become lists (one struct.unpack each)."""
    out: list[Any] = []
    for f in fields:
        if isinstance(f[1], Fixed):
            if out and isinstance(out[-1], list):
                out[-1].append(f)
            else:
                out.append([f])
        else:
            out.append(f)
    return out


def _literal(value: Any) -> str:
    if isinstance(value, int | float | str | bytes | bool | type(None)) or value in ((), {}):
        return repr(value)
    return f"CONSTS[{const(value)}]"


# ---- from declarations to constructs ----


def _default(f: Field, version: int) -> Any:
    """The value a missing key builds as."""
    if f.default is None and not within(f.nullable, version):
        return () if f.type.startswith("[]") else {} if f.fields else ZERO.get(f.type, 0)
    return f.default


def expand_default(f: Field, version: int, flexible: bool) -> Any:
    """The default as decoding would show it (structs become Containers of their defaults)."""
    value = _default(f, version)
    if f.fields and isinstance(value, dict):
        return Container(
            (sub.name, expand_default(sub, version, flexible))
            for sub in f.fields if within(sub.versions, version)
        )
    return value


def _fresh(f: Field, version: int, flexible: bool) -> Any:
    value = expand_default(f, version, flexible)
    return list(value) if isinstance(value, tuple) else value


def build_struct(fields: tuple[Field, ...], version: int, flexible: bool) -> KStruct:
    regular: list[tuple[str, Construct, Any]] = []
    tagged: list[TagSpec] = []
    for f in fields:
        if f.tag is not None and flexible and within(f.tagged, version):
            expanded = expand_default(f, version, flexible)
            factory = functools.partial(_fresh, f, version, flexible)
            tagged.append(TagSpec(f.tag, f.name, field_construct(f, version, flexible), expanded, factory))
        elif within(f.versions, version):
            regular.append((f.name, field_construct(f, version, flexible), _default(f, version)))
    tagged.sort(key=lambda t: t.tag)
    return KStruct(regular, tagged if flexible else None)


def field_construct(f: Field, version: int, flexible: bool) -> Construct:
    compact = within(f.flexible, version) if f.flexible is not None else flexible
    nullable = within(f.nullable, version)
    is_array = f.type.startswith("[]")
    if f.fields:
        element: Construct = build_struct(f.fields, version, flexible)
        if not is_array:
            return NullableStruct(element) if nullable else element
    else:
        base = f.type.removeprefix("[]")
        element = FIXED[base] if base in FIXED else VARIABLE[base, compact](nullable and not is_array)
    return Array(element, compact, nullable) if is_array else element


class Codec(NamedTuple):
    """One body schema: the interpreted struct (error reports) and its compiled twin (hot path)."""

    message: Message
    version: int
    interpreted: KStruct
    compiled: Any  # construct Compiled

    def parse(self, data: Any, offset: int = 0, max_elements: int | None = None) -> Container:
        return self.compiled.parsefunc(Reader(data, offset, max_elements), None)

    def parse_interpreted(self, data: Any, offset: int = 0) -> Container:
        return self.interpreted._parsereport(Reader(data, offset), Container(), "")


@functools.cache
def codec(api_key: int, version: int, kind: str) -> Codec | None:
    """The codec for a request or response body, or None if the api/version is unknown."""
    message = BY_KEY.get((api_key, kind))
    if message is None or not within(message.valid, version):
        return None
    struct = build_struct(message.fields, version, within(message.flexible, version))
    return Codec(message, version, struct, struct.compile())


def format_path(e: BaseException) -> str:
    steps = getattr(e, "kafka_path", [])
    return "".join(s if s.startswith("[") else "." + s for s in steps).lstrip(".")
