"""`kafka-sim consume`: a topic's records on stdout, one line each (Kafka's
kafka-console-consumer.sh, with its `--property print.*` options)."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from kafka import KafkaConsumer, TopicPartition

from broker.tools.command import ToolError, UsageError, connect, parser, properties, run
from broker.tools.message_formatter import MessageFormatter
from broker.tools.progress import Progress

PROG = "kafka-sim consume"
POLL_MS = 200  # how often an idle consumer checks its --timeout-ms and shows progress


def _parser() -> argparse.ArgumentParser:
    p = parser(PROG, "Print a topic's records on stdout, one line each (as "
                     "kafka-console-consumer.sh).")
    p.add_argument("--topic", required=True)
    p.add_argument("--group", help="consume as a member of this consumer group, committing its "
                   "offsets (default: read every partition without a group)")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset (with --group: when it has none committed)")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", help="with --partition: earliest, latest or an offset to start at")
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument("--timeout-ms", type=int,
                   help="stop when no record has come for this long (default: run until Ctrl-C)")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted", help="read_committed: only committed "
                   "transactions' records, below the last stable offset")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="what each line shows: print.key, print.value, print.headers, "
                        "print.timestamp, print.partition, print.offset, key.separator, "
                        "line.separator, headers.separator, null.literal (repeatable)")
    p.add_argument("--progress", action="store_true",
                   help="count records on stderr every second (the default on a terminal)")
    return p


def main(argv: list[str]) -> int:
    return run(PROG, _main, argv)


def _start_offset(args: argparse.Namespace) -> str | int:
    """Where an assigned partition starts: 'earliest', 'latest' or an offset."""
    if args.offset is None:
        return "earliest" if args.from_beginning else "latest"
    if args.offset in ("earliest", "latest"):
        return args.offset
    if args.offset.isdigit():
        return int(args.offset)
    raise UsageError(f"--offset takes earliest, latest or a non-negative offset, "
                     f"not {args.offset!r}")


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    formatter = MessageFormatter.from_properties(properties(args.property, "--property"))
    if args.offset is not None and args.partition is None:
        raise UsageError("--offset needs --partition")
    if args.group is not None and args.partition is not None:
        raise UsageError("--group and --partition go separately: a group's members get their "
                         "partitions from the group")
    if args.max_messages is not None and args.max_messages < 1:
        raise UsageError("--max-messages must be at least 1")
    start = _start_offset(args)
    # `kill` ends it as Ctrl-C does (as the JVM's shutdown hook does for Kafka's tool): offsets
    # committed, the group left.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    consumer = connect(
        KafkaConsumer, args, group_id=args.group, isolation_level=args.isolation_level,
        enable_auto_commit=args.group is not None, allow_auto_create_topics=False,
        auto_offset_reset="earliest" if args.from_beginning else "latest")
    try:
        _assign(consumer, args, start)
        return _print_records(consumer, formatter, args)
    finally:
        consumer.close()  # with a group: commits what was printed, then leaves the group


def _assign(consumer, args: argparse.Namespace, start: str | int) -> None:
    partitions = consumer.partitions_for_topic(args.topic)
    if not partitions:
        raise ToolError(f"topic '{args.topic}' does not exist")
    if args.group is not None:
        consumer.subscribe([args.topic])
        return
    if args.partition is not None and args.partition not in partitions:
        raise ToolError(f"topic '{args.topic}' has no partition {args.partition} "
                        f"(it has {len(partitions)})")
    chosen = [TopicPartition(args.topic, p) for p in sorted(partitions)
              if args.partition is None or p == args.partition]
    consumer.assign(chosen)
    if start == "earliest":
        consumer.seek_to_beginning(*chosen)
    elif start == "latest":
        consumer.seek_to_end(*chosen)
    else:
        for tp in chosen:
            consumer.seek(tp, start)


def _print_records(consumer, formatter: MessageFormatter, args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    progress = Progress(sys.stderr, "consumed", enabled=Progress.wanted(args.progress, sys.stderr))
    last_record = time.monotonic()
    try:
        while args.max_messages is None or progress.count < args.max_messages:
            left = None if args.max_messages is None else args.max_messages - progress.count
            batches = consumer.poll(timeout_ms=POLL_MS, max_records=left or 500)
            got = 0
            for records in batches.values():
                for record in records:
                    out.write(formatter.format(record))
                got += len(records)
            if got:
                out.flush()
                last_record = time.monotonic()
                progress.add(got)
            else:
                progress.tick()
                idle_ms = (time.monotonic() - last_record) * 1000
                if args.timeout_ms is not None and idle_ms >= args.timeout_ms:
                    break
    except KeyboardInterrupt:  # Ctrl-C (or kill) is how a consume without a limit ends
        pass
    progress.done()
    return 0
