"""Kafka's console producer line format: an optional headers part, an optional key and the value,
cut at the separators the `--property` options name (LineMessageReader's properties)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.tools.command import UsageError, flag


class LineFormatError(Exception):
    """A line that lacks a separator its properties require."""


@dataclass(slots=True)
class ProducerLine:
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(slots=True)
class LineReader:
    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        known = {"parse.key", "key.separator", "parse.headers", "headers.delimiter",
                 "headers.separator", "headers.key.separator", "ignore.error", "null.marker"}
        unknown = sorted(set(props) - known)
        if unknown:
            raise UsageError(f"unknown --property {unknown[0]} (known: {', '.join(sorted(known))})")
        reader = cls(parse_key=flag(props, "parse.key"), parse_headers=flag(props, "parse.headers"),
                     ignore_error=flag(props, "ignore.error"),
                     null_marker=props.get("null.marker"))
        for name in ("key.separator", "headers.delimiter", "headers.separator",
                     "headers.key.separator"):
            if name in props:
                if not props[name]:
                    raise UsageError(f"--property {name} may not be empty")
                setattr(reader, name.replace(".", "_"), props[name])
        return reader

    def read(self, line: str, number: int) -> ProducerLine:
        """One line (without its line break), the `number`th of the input (for errors)."""
        rest = line
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            part, found, after = rest.partition(self.headers_delimiter)
            if found:
                headers = self._headers(part, number)
                rest = after
            elif not self.ignore_error:
                raise LineFormatError(f"no headers delimiter found on line number {number}: "
                                      f"'{line}'")
        key = None
        if self.parse_key:
            part, found, after = rest.partition(self.key_separator)
            if found:
                key, rest = self._bytes(part), after
            elif not self.ignore_error:
                raise LineFormatError(f"no key separator found on line number {number}: '{line}'")
        return ProducerLine(value=self._bytes(rest), key=key, headers=headers)

    def _headers(self, part: str, number: int) -> list[tuple[str, bytes | None]]:
        headers = []
        for pair in part.split(self.headers_separator) if part else []:
            name, found, value = pair.partition(self.headers_key_separator)
            if self.null_marker is not None and name == self.null_marker:
                raise LineFormatError(f"header keys may not be the null marker "
                                      f"'{self.null_marker}' (line number {number})")
            headers.append((name, self._bytes(value) if found else None))
        return headers

    def _bytes(self, text: str) -> bytes | None:
        if self.null_marker is not None and text == self.null_marker:
            return None
        return text.encode("utf-8", "surrogateescape")  # the input's bytes, as they came
