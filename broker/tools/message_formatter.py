"""Kafka's console consumer output: each record's timestamp, partition, offset, headers and key
before its value, as the `--property print.*` options ask (DefaultMessageFormatter's properties)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.tools.command import UsageError, flag

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


@dataclass(slots=True)
class MessageFormatter:
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> MessageFormatter:
        flags = ("print.timestamp", "print.partition", "print.offset", "print.headers",
                 "print.key", "print.value")
        texts = ("key.separator", "line.separator", "headers.separator", "null.literal")
        unknown = sorted(set(props) - set(flags) - set(texts))
        if unknown:
            raise UsageError(f"unknown --property {unknown[0]} "
                             f"(known: {', '.join(sorted((*flags, *texts)))})")
        formatter = cls(**{name.replace(".", "_"): flag(props, name, name == "print.value")
                           for name in flags})
        for name in texts:
            if name in props:
                setattr(formatter, name.replace(".", "_"), props[name].encode())
        return formatter

    def format(self, record) -> bytes:
        """A kafka-python ConsumerRecord as one line of output (its line separator included)."""
        fields: list[bytes] = []
        if self.print_timestamp:
            kind = TIMESTAMP_TYPES.get(record.timestamp_type)
            fields.append(f"{kind}:{record.timestamp}".encode() if kind and record.timestamp >= 0
                          else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            fields.append(self.headers_separator.join(
                name.encode() + b":" + self._text(value) for name, value in record.headers)
                if record.headers else b"NO_HEADERS")
        if self.print_key:
            fields.append(self._text(record.key))
        if self.print_value:
            fields.append(self._text(record.value))
        return self.key_separator.join(fields) + self.line_separator

    def _text(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else data
