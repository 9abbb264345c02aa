"""`kafka-sim produce`: each line of stdin becomes a record of the topic (Kafka's
kafka-console-producer.sh, with its `--property` line format)."""

from __future__ import annotations

import argparse
import sys

from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

from broker.tools.command import ToolError, UsageError, connect, parser, properties, run
from broker.tools.line_reader import LineFormatError, LineReader
from broker.tools.progress import Progress

PROG = "kafka-sim produce"
ACKS = {"0": 0, "1": 1, "-1": "all", "all": "all"}


def _parser() -> argparse.ArgumentParser:
    p = parser(PROG, "Send each line of stdin to a topic as one record (as "
                     "kafka-console-producer.sh).")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="send every record to this partition "
                   "(default: by key, or spread over the partitions)")
    p.add_argument("--acks", choices=sorted(ACKS), default="all",
                   help="acknowledgements each batch waits for (default all)")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="how lines are read: parse.key, key.separator, parse.headers, "
                        "headers.delimiter, headers.separator, headers.key.separator, "
                        "ignore.error, null.marker (repeatable)")
    p.add_argument("--progress", action="store_true",
                   help="count records on stderr every second (the default on a terminal)")
    return p


def main(argv: list[str]) -> int:
    return run(PROG, _main, argv)


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    reader = LineReader.from_properties(properties(args.property, "--property"))
    if args.partition is not None and args.partition < 0:
        raise UsageError("--partition may not be negative")
    # A topic that does not exist (and is not auto-created) fails the first send after
    # max_block_ms: the connect timeout bounds that wait as well.
    producer = connect(KafkaProducer, args, acks=ACKS[args.acks],
                       max_block_ms=args.connect_timeout_ms)
    try:
        return _send_lines(producer, reader, args)
    finally:
        producer.close()


def _send_lines(producer, reader: LineReader, args: argparse.Namespace) -> int:
    try:
        partitions = producer.partitions_for(args.topic)
    except KafkaTimeoutError:
        raise ToolError(f"topic '{args.topic}' is not available (no metadata within "
                        f"{args.connect_timeout_ms} ms)") from None
    if args.partition is not None and args.partition not in partitions:
        raise ToolError(f"topic '{args.topic}' has no partition {args.partition} "
                        f"(it has {len(partitions)})")
    progress = Progress(sys.stderr, "produced",
                        enabled=Progress.wanted(args.progress, sys.stderr, sys.stdin))
    failures: list[str] = []

    def failed(exc: BaseException) -> None:
        failures.append(str(exc))
        print(f"{PROG}: a record to {args.topic} failed: {exc}", file=sys.stderr)

    for number, raw in enumerate(sys.stdin.buffer, start=1):
        line = raw.decode("utf-8", "surrogateescape").rstrip("\n").removesuffix("\r")
        try:
            record = reader.read(line, number)
        except LineFormatError as exc:
            raise ToolError(str(exc)) from None
        producer.send(args.topic, value=record.value, key=record.key,
                      headers=record.headers or None,
                      partition=args.partition).add_errback(failed)
        progress.add()
    producer.flush()
    progress.done()
    return 1 if failures else 0
