"""What every console tool shares: its argument parser, `--bootstrap-server`, quiet client logging,
and turning failures into one line on stderr with a non-zero exit code."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import TypeVar

from kafka.errors import KafkaError, KafkaTimeoutError

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_CONNECT_TIMEOUT_MS = 5000
EXIT_ERROR = 1
EXIT_USAGE = 2
T = TypeVar("T")


class UsageError(Exception):
    """Bad command-line arguments (argparse would otherwise exit the process itself)."""


class ToolError(Exception):
    """A failure the tool explains in one line (an unknown topic or group, a refused request)."""


class ToolParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def parser(prog: str, description: str) -> ToolParser:
    p = ToolParser(prog=prog, description=description)
    p.set_defaults(client_id=prog.replace(" ", "-"))
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,...]",
                   help=f"brokers to connect to (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--connect-timeout-ms", type=int, default=DEFAULT_CONNECT_TIMEOUT_MS,
                   metavar="MS", help="give up reaching a broker after this long "
                   f"(default {DEFAULT_CONNECT_TIMEOUT_MS})")
    return p


def client_options(args: argparse.Namespace) -> dict:
    """kafka-python options every client of a tool takes (its client id names the tool, as a
    group's members show it)."""
    return {"bootstrap_servers": args.bootstrap_server.split(","),
            "bootstrap_timeout_ms": args.connect_timeout_ms,
            "client_id": args.client_id}


def reachable(servers: list[str], timeout_s: float) -> list[str]:
    """The bootstrap servers that accept a connection now, in the order given (all of them when
    none does, for the client to report). kafka-python bootstraps from a random one each try and
    backs off a refused one longer each time: with a stopped broker in the list it now and then
    spent its whole timeout there."""
    up = []
    for server in servers:
        host, _, port = server.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout_s).close()
        except (OSError, ValueError):
            continue
        up.append(server)
    return up or servers


def connect(factory: Callable[..., T], args: argparse.Namespace, **options) -> T:
    """A kafka-python client, or a ToolError naming the address when no broker answers."""
    settings = client_options(args)
    servers = settings["bootstrap_servers"]
    if len(servers) > 1:
        settings["bootstrap_servers"] = reachable(servers, min(args.connect_timeout_ms / 1000, 1.0))
    try:
        return factory(**settings, **options)
    except KafkaTimeoutError:
        raise ToolError(f"cannot reach a broker at {args.bootstrap_server} "
                        f"(gave up after {args.connect_timeout_ms} ms)") from None


def error_line(exc: BaseException) -> str:
    """A broker's error as Kafka names and explains it (without the request kafka-python puts in
    its text); a client-side error as kafka-python says it."""
    if getattr(exc, "errno", None) is not None:
        return f"{exc.message}: {exc.description}"  # type: ignore[attr-defined]
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def one_action(args: argparse.Namespace, actions: tuple[str, ...]) -> str:
    """The one action flag given (Kafka's scripts take exactly one); UsageError otherwise."""
    given = [a for a in actions if getattr(args, a)]
    if len(given) != 1:
        flags = [f"--{a.replace('_', '-')}" for a in actions]
        raise UsageError(f"give exactly one action: {', '.join(flags[:-1])} or {flags[-1]}")
    return given[0]


def run(prog: str, body: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a tool's body; say what went wrong in one line (no traceback) and exit non-zero."""
    # kafka-python logs its retries as warnings; Python's last-resort handler would print them.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    try:
        return body(argv)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ToolError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KafkaTimeoutError as exc:
        print(f"{prog}: timed out: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return EXIT_ERROR
    except KafkaError as exc:
        print(f"{prog}: {error_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `kafka-sim consume ... | head`: the reader left, not an error
        # Python flushes stdout again at exit: point it at /dev/null so that finds no pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def properties(pairs: list[str], option: str) -> dict[str, str]:
    """`k=v` pairs of a repeatable option (`--property`, `--config`)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} takes key=value, not {pair!r}")
        out[key] = value
    return out


def flag(props: dict[str, str], name: str, default: bool = False) -> bool:
    value = props.get(name)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise UsageError(f"--property {name} takes true or false, not {value!r}")
    return value.lower() == "true"
