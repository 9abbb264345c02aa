"""The `kafka-sim` command: `run` starts an embedded cluster in the foreground (or one broker of a
multi-process cluster with `-o zookeeper.connect=...`), `zookeeper` runs a local ZooKeeper for
one, `ctl` talks to a running cluster's control API, `topics`, `produce`, `consume` and `groups`
are Kafka's console tools, `pipeline` runs the Spark jobs over a data directory."""

from __future__ import annotations

import argparse
import faulthandler
import gc
import signal
import sys
from pathlib import Path

# The console tools, clients of a running broker: they load kafka-python, never the broker.
TOOLS = ("topics", "produce", "consume", "groups")

# The broker's modules are imported where a command needs them: `kafka-sim ctl` never loads the
# broker, and `run` loads it with the cyclic collector off (see main).


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-sim", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="start an embedded cluster (or, with -o zookeeper.connect=..., "
                                     "one broker of a multi-process cluster) in the foreground")
    run.add_argument("--brokers", type=int, default=None,
                     help="brokers of the embedded cluster, on consecutive ports (default 3)")
    run.add_argument("--config", type=Path, help="a Kafka-style server.properties file")
    run.add_argument("--override", "-o", action="append", default=[], metavar="NAME=VALUE",
                     help="set a broker property (repeatable), e.g. -o num.partitions=3")
    run.add_argument("--listeners", help="shortcut for -o listeners=... (the first broker's)")
    run.add_argument("--log-dirs", help="shortcut for -o log.dirs=...")
    sub.add_parser("configs", help="list the broker properties and their defaults")
    certs = sub.add_parser("certs", help="write a throwaway CA, a broker certificate (127.0.0.1, "
                                         "localhost) and a client certificate in PEM, for TLS tests")
    certs.add_argument("directory", type=Path)
    zk = sub.add_parser("zookeeper", help="run a local ZooKeeper (Debian's package) in the "
                                          "foreground, for a multi-process cluster")
    zk.add_argument("--port", type=int, default=2181, help="client port on 127.0.0.1 (default 2181)")
    zk.add_argument("--data-dir", type=Path, default=Path("data/zookeeper"),
                    help="where ZooKeeper keeps its data (default ./data/zookeeper)")
    sub.add_parser("ctl", help="control a running cluster (kafka-sim ctl --help)", add_help=False)
    for name, help_text in (("topics", "list, create, describe, delete or grow topics"),
                            ("produce", "send lines of stdin to a topic"),
                            ("consume", "print a topic's records on stdout"),
                            ("groups", "list, describe, reset or delete consumer groups")):
        sub.add_parser(name, help=f"{help_text} (kafka-sim {name} --help)", add_help=False)
    sub.add_parser("pipeline", help="Spark jobs over a data directory (kafka-sim pipeline --help)",
                   add_help=False)
    sub.add_parser("simulate", help="a seeded simulation of the cluster under faults, checked "
                                    "for lost writes and other anomalies (kafka-sim simulate "
                                    "--help)", add_help=False)
    return parser


async def _run(config, num_brokers: int) -> None:
    import asyncio

    from broker.config import parse_listener
    from broker.control.control_server import ControlServer
    from broker.logs import release as release_logs
    if config["zookeeper.connect"]:  # one broker of a multi-process cluster
        from broker.server.broker_process import BrokerProcess

        cluster = BrokerProcess(config)
    else:
        from broker.server.cluster import Cluster

        cluster = Cluster(config, num_brokers)
    control = None
    if config["control.listener"]:  # checked before any broker starts: a refusal stops nothing
        host, port = parse_listener(config["control.listener"])
        control = ControlServer(cluster, host, port, allow_remote=config["control.allow.remote"],
                                token=config["control.token"])
    try:
        await cluster.start()
        release_logs()  # the brokers serve: structlog may load now, and what start-up logged goes out
        # Start-up objects (schemas, compiled codecs, handler tables) live for the whole run: keep
        # them out of the cyclic collector's full passes, which otherwise show up as latency spikes.
        gc.freeze()
        gc.enable()  # off since main: start-up frees little, its collections were wasted work
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):  # the brokers serve: stop them cleanly
            loop.add_signal_handler(sig, stop.set)
        if control is not None:
            await control.start()
            gc.freeze()  # aiohttp's modules and the app: loaded for the whole run as well
        # A multi-process broker that halted on a failed log dir ends its process (Kafka's
        # Exit.halt); in the embedded cluster the others go on and the halted one can be started.
        halted: asyncio.Event | None = getattr(cluster, "halted", None)
        waits = [asyncio.ensure_future(e.wait()) for e in (stop, halted) if e is not None]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
    except BaseException:
        await _stop(control, cluster)
        raise
    try:
        await _stop(control, cluster)
    except Exception as exc:  # the cluster ran: a failure now is no start-up error
        from broker.logs import get_logger

        get_logger("kafka_sim.cli").exception("stopping failed")
        raise ShutdownError(f"{type(exc).__name__}: {exc}") from exc
    if halted is not None and halted.is_set():
        raise BrokerHalted()


class BrokerHalted(Exception):
    """The broker halted (its log dir failed; the broker logged why): exit 1, as Kafka's halt."""


class ShutdownError(Exception):
    """Stopping the cluster failed (after it ran)."""


async def _stop(control, cluster) -> None:
    if control is not None:
        await control.stop()
    await cluster.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ctl"]:
        from broker.control.ctl import main as ctl_main

        return ctl_main(argv[1:])
    if argv[:1] and argv[0] in TOOLS:  # clients of a running broker, as Kafka's scripts
        return _tool(argv[0])(argv[1:])
    if argv[:1] == ["simulate"]:
        from broker.simulation.command import main as simulate_main

        return simulate_main(argv[1:])
    if argv[:1] == ["pipeline"]:
        from pipeline.cli import main as pipeline_main  # Spark is an optional extra

        return pipeline_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "configs":
        from broker.config import PROPERTIES

        for p in PROPERTIES:
            print(f"{p.name}={p.default}    # {p.doc}")
        return 0
    if args.command == "zookeeper":
        return _zookeeper(args.port, args.data_dir)
    if args.command == "certs":
        from broker.security.certs import write_certificates

        for path in write_certificates(args.directory).values():
            print(path)
        return 0
    if args.command != "run":
        _parser().print_help()
        return 2
    # kill -QUIT prints every thread's stack on stderr and the broker goes on, as a JVM's does.
    faulthandler.register(signal.SIGQUIT, all_threads=True, chain=False)
    # Importing and building the brokers allocates a great many objects that all stay alive: the
    # cyclic collector's passes over them would find nothing. _run enables it once they are frozen.
    gc.disable()
    try:
        return _run_command(args)
    finally:
        gc.enable()


def _run_command(args: argparse.Namespace) -> int:
    from broker import logs
    from broker.config import ConfigError, build_config, parse_overrides
    from broker.control.control_server import RemoteBindRefused
    from broker.metadata.store import MetadataStoreError
    from broker.server.kafka_server import LogDirFailedAtStart
    from broker.server.log_setup import configure_logging, level_number

    try:
        overrides = parse_overrides(args.override)
        if args.listeners:
            overrides["listeners"] = args.listeners
        if args.log_dirs:
            overrides["log.dirs"] = args.log_dirs
        config = build_config(overrides, properties_file=args.config)
        if args.brokers is not None and args.brokers < 1:
            raise ConfigError("--brokers must be at least 1")
        if args.brokers not in (None, 1) and config["zookeeper.connect"]:
            raise ConfigError("with zookeeper.connect each process runs one broker: "
                              "start one process per broker (no --brokers)")
        level_number(config["log.level"])
    except (ConfigError, OSError) as exc:
        print(f"kafka-sim: {exc}", file=sys.stderr)
        return 2
    # structlog is a tenth of start-up: its lines are held, and logged with the time they were
    # logged at once the brokers serve (_run), or once start-up failed, before the error is printed.
    logs.hold_until_serving(lambda: configure_logging(config["log.level"]))
    try:
        try:
            _event_loop_runner()(_run(config, args.brokers or 3))
        finally:
            logs.release()
    except RemoteBindRefused as exc:
        print(f"kafka-sim: control.listener {config['control.listener']}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. a port in use: say which, without a traceback
        print(f"kafka-sim: cannot start: {exc}", file=sys.stderr)
        return 2
    except MetadataStoreError as exc:  # ZooKeeper unreachable
        print(f"kafka-sim: cannot start: {exc}", file=sys.stderr)
        return 2
    except LogDirFailedAtStart as exc:  # its message names the broker, the dir and the error
        print(f"kafka-sim: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:  # a key store, trust store or JAAS setting read at start-up
        print(f"kafka-sim: {exc}", file=sys.stderr)
        return 2
    except ShutdownError as exc:
        print(f"kafka-sim: stopped with an error: {exc}", file=sys.stderr)
        return 1
    except BrokerHalted:
        return 1
    return 0


def _tool(name: str):
    """The main function of a console tool (imported only when that tool runs)."""
    if name == "topics":
        from broker.tools.topics import main
    elif name == "produce":
        from broker.tools.console_producer import main
    elif name == "consume":
        from broker.tools.console_consumer import main
    else:
        from broker.tools.consumer_groups import main
    return main


def _zookeeper(port: int, data_dir: Path) -> int:
    from broker.server.zookeeper_runner import ZooKeeperServer, ZooKeeperUnavailable

    server = ZooKeeperServer(data_dir, port)
    try:
        server.start()
    except ZooKeeperUnavailable as exc:
        print(f"kafka-sim: {exc}", file=sys.stderr)
        return 2
    print(f"ZooKeeper on {server.connect_string} (data in {data_dir}); Ctrl-C stops it", flush=True)
    signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        signal.sigwait(signals)
    finally:
        server.stop()
    return 0


def _event_loop_runner():
    import asyncio

    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


if __name__ == "__main__":
    sys.exit(main())
