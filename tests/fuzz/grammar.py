"""The request grammar, read from the project's message definitions: valid-shaped request bodies
for every API and version the broker advertises, drawn from a `Source` of choices.

One grammar serves two drivers: hypothesis (`request_frames`, a strategy that shrinks) and the
long run, which draws from a seeded `random.Random` because hypothesis costs ~1 ms per example.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hypothesis import strategies as st

from broker.handlers import HANDLERS, load_handlers
from protocol import encode_frame, encode_request, encode_request_header
from protocol.api import ProtocolEncodeError
from protocol.message_spec import Field
from protocol.records import encode_batch
from protocol.schema import BY_KEY, within
from tests.fuzz.mutate import corrupt_batch

# A small world of names, so requests hit existing topics and groups instead of creating a new
# topic per input (which would measure disk growth, not robustness).
TOPICS = ("fuzz-a", "fuzz-b", "fuzz-compact", "__consumer_offsets", "", "bad name!", "x" * 250)
GROUPS = ("fuzz-group", "g2", "")
STRINGS = ("", "0", "-1", "compact", "cleanup.policy", "retention.ms", "max.message.bytes",
           "consumer", "range", "\x00", "\u00e9\u4e2d", "%s%n", "a" * 300)
CONFIG_VALUES = ("compact", "delete", "compact,delete", "1", "-1", "0", "1000", "abc", "")
BOUNDARY = (0, 1, -1, -2, 2, 3, 127, 128, 255, 256, 32767, 32768, 65535, 2**31 - 1, -(2**31),
            2**31, 2**32 - 1, 2**63 - 1, -(2**63))
RANGES = {"int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
          "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1)}
MAX_ARRAY = 3
PARTITION_COUNTS = frozenset({"count", "num_partitions"})
INTER_BROKER = frozenset({4, 5, 6, 7})  # LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown
ADMIN_WAITS = frozenset({19, 20, 37})  # CreateTopics, DeleteTopics, CreatePartitions


class Source(Protocol):
    """Where the grammar's choices come from."""

    def int(self, lo: int, hi: int) -> int: ...
    def pick(self, options: Sequence[Any]) -> Any: ...
    def chance(self, percent: int) -> bool: ...
    def raw(self, size: int) -> bytes: ...


class RandomSource:
    """Choices from a seeded random.Random: fast, for the long run and for mutations."""

    __slots__ = ("rng",)

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def pick(self, options: Sequence[Any]) -> Any:
        return options[self.rng.randrange(len(options))]

    def chance(self, percent: int) -> bool:
        return self.rng.randrange(100) < percent

    def raw(self, size: int) -> bytes:
        return self.rng.randbytes(size)


class DrawSource:
    """Choices drawn by hypothesis, so a failing input shrinks (towards 0, the first option, no)."""

    __slots__ = ("draw",)

    def __init__(self, draw: Callable[[st.SearchStrategy], Any]) -> None:
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def pick(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(options))

    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) >= 100 - percent

    def raw(self, size: int) -> bytes:
        return self.draw(st.binary(min_size=size, max_size=size))


def advertised(*, controller_apis: bool = False) -> list[tuple[int, int]]:
    """The (api_key, version) pairs the broker's handler registry serves (what ApiVersions lists).

    With no authorizer (as Kafka without one) a forged LeaderAndIsr or UpdateMetadata
    legitimately rewrites the broker's view: client requests then meet NOT_LEADER errors, and
    the admin requests that wait for the metadata cache wait out their timeout_ms on the wall
    clock. So the controller's APIs come only with `controller_apis`, and then without those
    admin requests; drivers run that mix last."""
    load_handlers()
    left_out = ADMIN_WAITS if controller_apis else INTER_BROKER
    return [(key, v) for key, h in sorted(HANDLERS.items()) if key not in left_out
            for v in range(h.min_version, h.max_version + 1)]


def integer(src: Source, kind: str, name: str) -> int:
    """A `kind` integer for field `name`: mostly -1..4 (ids, indexes), then boundaries, then any."""
    lo, hi = RANGES[kind]
    if name.endswith("_ms") and src.chance(80):
        return src.int(0, 300)  # admin requests wait on the wall clock: keep most short
    if name == "acks" and src.chance(80):
        return src.pick((-1, 0, 1))
    if name in PARTITION_COUNTS:
        # Counts the broker refuses (over 10,000 new), or small ones: each accepted large count
        # creates as many logs in the fuzz broker for good (mutations still reach them).
        return src.pick((-2, -1, 0, 1, 2, 3, 4, 20_001, 2**31 - 1, -(2**31)))
    roll = src.int(0, 9)
    if roll < 6:
        return src.int(max(lo, -1), min(hi, 4))
    if roll < 9:
        return min(hi, max(lo, src.pick(BOUNDARY)))
    return src.int(lo, hi)


def string(src: Source, name: str, nullable: bool) -> str | None:
    """Mostly a name from the small world above (by the field's name), else any short text."""
    if nullable and src.chance(15):
        return None
    if "topic" in name or name == "name":
        pool: Sequence[str] = TOPICS
    elif "group" in name or name == "key":
        pool = GROUPS
    elif name == "value":
        pool = CONFIG_VALUES
    else:
        pool = STRINGS
    if src.chance(85):
        return src.pick(pool)
    return "".join(chr(src.int(0, 0x2FF)) for _ in range(src.int(0, 12)))


FUZZ_NOW_MS = 1_795_000_000_000


def records(src: Source) -> bytes:
    """A record batch (1-3 records, any codec), often made hostile with its CRC fixed after."""
    count = src.int(1, 3)
    rows = [(src.pick((None, b"k", b"")), src.raw(src.int(0, 20)),
             [("h", src.pick((None, b"v")))] if src.chance(20) else [],
             # a fixed "now", not None (the clock): a compressed batch's size follows its
             # bytes, and hypothesis replays an example only if every draw bounded by that size
             # comes out the same
             src.pick((FUZZ_NOW_MS, 0, 1000, -1, 2**62))) for _ in range(count)]
    batch = bytearray(encode_batch(
        rows, compression=src.int(0, 4), producer_id=src.pick((-1, -1, 0, 7, 2**62)),
        producer_epoch=src.pick((-1, 0, 1)), base_sequence=src.pick((-1, 0, 5)),
        is_transactional=src.chance(10), is_control=src.chance(10)))
    if src.chance(40):
        batch = corrupt_batch(src, batch)
    if src.chance(20):
        batch = batch * 2  # two batches in one records field
    return bytes(batch)


def value(src: Source, f: Field, version: int) -> Any:
    nullable = within(f.nullable, version)
    if f.type.startswith("[]"):
        if nullable and src.chance(10):
            return None
        n = src.int(0, MAX_ARRAY)
        element = Field(f.name, f.type[2:], f.versions, fields=f.fields)
        return [value(src, element, version) for _ in range(n)]
    if f.fields:
        if nullable and src.chance(15):
            return None
        return body(src, f.fields, version)
    kind = f.type
    if kind in RANGES:
        return integer(src, kind, f.name)
    if kind == "bool":
        return src.chance(50)
    if kind == "float64":
        return src.pick((0.0, 1.0, -1.0, float("inf"), float("nan"), 1e308))
    if kind == "uuid":
        return src.pick((b"\x00" * 16, b"\x01" * 16)) if src.chance(80) else src.raw(16)
    if kind == "string":
        return string(src, f.name, nullable)
    if nullable and src.chance(10):
        return None
    if kind == "records":
        return records(src)
    return src.raw(src.int(0, 16))  # bytes


def body(src: Source, fields: Sequence[Field], version: int) -> dict:
    """Every field of `version` (tagged ones too: the encoder writes those not at default)."""
    out = {}
    for f in fields:
        present = within(f.versions, version) or (f.tag is not None and within(f.tagged, version))
        if present and (f.tag is None or src.chance(50)):
            out[f.name] = value(src, f, version)
    return out


def request_frame(src: Source, api_key: int, version: int, correlation_id: int) -> bytes:
    """A size-prefixed request frame; a body the encoder refuses falls back to all defaults."""
    message = BY_KEY[api_key, "request"]
    header = encode_request_header(api_key, version, correlation_id,
                                   src.pick(("fuzz", None, "", "c" * 100)))
    try:
        payload = encode_request(api_key, version, body(src, message.fields, version))
    except ProtocolEncodeError:
        payload = encode_request(api_key, version, {})
    return encode_frame(header + payload)


@st.composite
def request_frames(draw: Callable[[st.SearchStrategy], Any],
                   apis: Sequence[tuple[int, int]] | None = None) -> bytes:
    """Hypothesis strategy: one valid-shaped request frame of an advertised API version."""
    src = DrawSource(draw)
    api_key, version = src.pick(apis or advertised())
    return request_frame(src, api_key, version, src.int(0, 2**31 - 1))
