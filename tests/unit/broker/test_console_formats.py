"""The console tools' line formats (Kafka's LineMessageReader and DefaultMessageFormatter
properties) and their progress count, on a manual clock."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import pytest

from broker.tools.command import UsageError
from broker.tools.line_reader import LineFormatError, LineReader, ProducerLine
from broker.tools.message_formatter import MessageFormatter
from broker.tools.progress import Progress


def test_a_plain_line_is_the_value():
    assert LineReader().read("a\tb:c", 1) == ProducerLine(value=b"a\tb:c")


def test_keys_and_headers_are_cut_at_their_separators():
    reader = LineReader.from_properties({"parse.key": "true", "key.separator": ":",
                                         "parse.headers": "true"})
    assert reader.read("h1:v1,h2\tk1:v:1", 7) == ProducerLine(
        value=b"v:1", key=b"k1", headers=[("h1", b"v1"), ("h2", None)])
    assert reader.read("\tk:v", 8) == ProducerLine(value=b"v", key=b"k", headers=[])


def test_a_missing_separator_names_the_line_unless_ignored():
    reader = LineReader.from_properties({"parse.key": "true"})
    with pytest.raises(LineFormatError, match="no key separator found on line number 3: 'abc'"):
        reader.read("abc", 3)
    lenient = LineReader.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert lenient.read("abc", 3) == ProducerLine(value=b"abc", key=None)


def test_the_null_marker_makes_null_keys_and_values():
    reader = LineReader.from_properties({"parse.key": "true", "null.marker": "<null>"})
    assert reader.read("<null>\t<null>", 1) == ProducerLine(value=None, key=None)


@pytest.mark.parametrize("props", [{"parse.keys": "true"}, {"parse.key": "yes"},
                                   {"key.separator": ""}])
def test_bad_reader_properties_are_usage_errors(props):
    with pytest.raises(UsageError):
        LineReader.from_properties(props)


@dataclass
class Record:  # the fields of kafka-python's ConsumerRecord the formatter reads
    value: bytes | None
    key: bytes | None = None
    partition: int = 2
    offset: int = 41
    timestamp: int = 1700000000000
    timestamp_type: int = 0
    headers: list = field(default_factory=list)


def test_the_value_alone_by_default():
    assert MessageFormatter().format(Record(b"v", key=b"k")) == b"v\n"


def test_every_field_in_kafkas_order():
    formatter = MessageFormatter.from_properties({
        "print.key": "true", "print.headers": "true", "print.timestamp": "true",
        "print.partition": "true", "print.offset": "true"})
    line = formatter.format(Record(b"v", key=b"k", headers=[("a", b"1"), ("b", None)]))
    assert line == b"CreateTime:1700000000000\tPartition:2\tOffset:41\ta:1,b:null\tk\tv\n"
    line = formatter.format(Record(None, timestamp_type=1))
    assert line == b"LogAppendTime:1700000000000\tPartition:2\tOffset:41\tNO_HEADERS\tnull\tnull\n"


def test_separators_and_the_null_literal_are_properties():
    formatter = MessageFormatter.from_properties({
        "print.key": "true", "print.value": "false", "key.separator": " | ",
        "line.separator": ";", "null.literal": "-"})
    assert formatter.format(Record(b"v", key=None)) == b"-;"


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_once_a_second_and_at_the_end():
    clock, out = ManualClock(), io.StringIO()
    progress = Progress(out, "produced", enabled=True, clock=clock)
    progress.add(500)
    assert out.getvalue() == ""  # not a second yet
    clock.now += 1.0
    progress.add(1500)
    clock.now += 0.5
    progress.add(1)
    progress.tick()
    assert out.getvalue() == "produced 2,000 records (2,000/s)\n"
    clock.now += 0.5
    progress.tick()
    progress.done()
    assert out.getvalue().splitlines()[1:] == ["produced 2,001 records (1,000/s)",
                                               "produced 2,001 records (1,000/s)"]


def test_progress_is_silent_unless_asked_or_on_a_terminal():
    clock, out = ManualClock(), io.StringIO()
    progress = Progress(out, "consumed", enabled=Progress.wanted(False, out))
    progress.add(10)
    progress.done()  # would show the count if it were on
    assert out.getvalue() == ""
    assert Progress.wanted(True, out)
    assert Progress.wanted(False, Terminal()) and Progress.wanted(False, Terminal(), out)
    assert not Progress.wanted(False, Terminal(), Terminal())  # lines typed on the terminal
    terminal = Terminal()
    progress = Progress(terminal, "consumed", enabled=True, clock=clock)
    clock.now += 1
    progress.add(3)
    progress.done()
    assert terminal.getvalue() == ("\rconsumed 3 records (3/s)\x1b[K"
                                   "\rconsumed 3 records (3/s)\x1b[K\n")
