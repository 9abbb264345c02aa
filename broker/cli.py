"""The `kafka-sim` command: `kafka-sim run` starts a broker in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from broker.config import PROPERTIES, ConfigError, build_config, parse_overrides
from broker.log_setup import configure_logging


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-sim", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="start a broker in the foreground")
    run.add_argument("--config", type=Path, help="a Kafka-style server.properties file")
    run.add_argument("--override", "-o", action="append", default=[], metavar="NAME=VALUE",
                     help="set a broker property (repeatable), e.g. -o num.partitions=3")
    run.add_argument("--listeners", help="shortcut for -o listeners=...")
    run.add_argument("--log-dirs", help="shortcut for -o log.dirs=...")
    sub.add_parser("configs", help="list the broker properties and their defaults")
    return parser


async def _run(config) -> None:
    from broker.broker import Broker

    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await broker.stop()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "configs":
        for p in PROPERTIES:
            print(f"{p.name}={p.default}    # {p.doc}")
        return 0
    if args.command != "run":
        _parser().print_help()
        return 2
    try:
        overrides = parse_overrides(args.override)
        if args.listeners:
            overrides["listeners"] = args.listeners
        if args.log_dirs:
            overrides["log.dirs"] = args.log_dirs
        config = build_config(overrides, properties_file=args.config)
    except (ConfigError, OSError) as exc:
        print(f"kafka-sim: {exc}", file=sys.stderr)
        return 2
    configure_logging(config["log.level"])
    runner = _event_loop_runner()
    runner(_run(config))
    return 0


def _event_loop_runner():
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


if __name__ == "__main__":
    sys.exit(main())
