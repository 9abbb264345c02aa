"""How a Kafka message is declared as data: its fields with version ranges, tags and defaults.

protocol/messages.py (generated) holds one entry per request, response and header, its fields as
text that `decode_fields` turns into `Field`s; protocol/schema.py makes them construct structures
per version.
"""

from __future__ import annotations

import ast
from typing import Any, NamedTuple

Versions = tuple[int, int]


class Field(NamedTuple):
    name: str  # snake_case
    type: str  # primitive, "[]primitive", StructName or "[]StructName" (then `fields` is set)
    versions: Versions
    nullable: Versions = (0, -1)
    tag: int | None = None
    tagged: Versions = (0, -1)
    default: Any = 0  # wire default for scalars; () for arrays; {} for structs; None = null
    fields: tuple[Field, ...] = ()
    flexible: Versions | None = None  # field-level override of the message's flexible versions


class Message(NamedTuple):
    name: str
    kind: str  # "request", "response" or "header"
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]


def decode_fields(text: str) -> tuple[Field, ...]:
    """A message's fields from their text in protocol/messages.py."""
    return _fields(ast.literal_eval(text))


def _fields(raw: tuple) -> tuple[Field, ...]:
    return tuple(
        Field(name, type_, versions,
              **{key: _fields(value) if key == "fields" else value for key, value in options.items()})
        for name, type_, versions, options in raw
    )
