"""`kafka-sim ctl ...`: the control API from a shell (tables for people, JSON where it nests)."""

from __future__ import annotations

import argparse
import datetime
import getpass
import json
import os
import sys
from collections.abc import Callable

from broker.control.control_client import (
    DEFAULT_URL,
    TOKEN_ENV,
    URL_ENV,
    ControlClient,
    ControlError,
)
from broker.control.fault_schedule import KINDS, FaultSchedule, ScheduleRunner

PROG = "kafka-sim ctl"


class UsageError(Exception):
    """Bad command-line arguments (argparse would otherwise exit the process)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}\n{self.format_usage().strip()}")


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *rows])


def _json(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=False)


# --- commands: each takes the client and the parsed args, returns what to print ------------------

def cmd_brokers(client: ControlClient, args: argparse.Namespace) -> str:
    rows = [[b.get("id"), f"{b.get('host')}:{b.get('port')}", "yes" if b.get("alive") else "no",
             "*" if b.get("controller") else "", b.get("controller_epoch", "")]
            for b in client.brokers()]
    return table(rows, ["ID", "ADDRESS", "ALIVE", "CONTROLLER", "CONTROLLER_EPOCH"])


def cmd_broker_stop(client: ControlClient, args: argparse.Namespace) -> str:
    client.stop_broker(args.id)
    return f"broker {args.id} stopped"


def cmd_broker_start(client: ControlClient, args: argparse.Namespace) -> str:
    client.start_broker(args.id)
    return f"broker {args.id} started"


def cmd_partitions(client: ControlClient, args: argparse.Namespace) -> str:
    return _json(client.partitions(args.topic))


def cmd_replication_pause(client: ControlClient, args: argparse.Namespace) -> str:
    client.pause_replication(args.id)
    return f"replication paused on broker {args.id}"


def cmd_replication_resume(client: ControlClient, args: argparse.Namespace) -> str:
    client.resume_replication(args.id)
    return f"replication resumed on broker {args.id}"


def _describe_action(fault: dict) -> str:
    return {"error": lambda f: f"error {f['error']} ({f.get('error_name')})",
            "delay_ms": lambda f: f"delay {f['delay_ms']} ms"}.get(
                fault["action"], lambda f: f["action"].replace("_", "-"))(fault)


def cmd_fault_add(client: ControlClient, args: argparse.Namespace) -> str:
    error = args.error
    if error is not None and error.lstrip("-").isdigit():
        error = int(error)
    fault = client.add_fault(args.broker, args.api, partition=args.partition, error=error,
                             drop_response=args.drop_response, disconnect=args.disconnect,
                             delay_ms=args.delay_ms, count=args.count)
    return f"fault {fault['id']} added: {_describe_fault(fault)}"


def _describe_fault(f: dict) -> str:
    where = f" on {f['partition']}" if f.get("partition") else ""
    times = "until cleared" if f.get("remaining") is None else f"{f['remaining']} time(s)"
    return f"broker {f['broker']} {f['api']}{where}: {_describe_action(f)}, {times}"


def cmd_fault_list(client: ControlClient, args: argparse.Namespace) -> str:
    rows = [[f["id"], f["broker"], f["api"], f.get("partition") or "*", _describe_action(f),
             "-" if f.get("remaining") is None else f["remaining"], f.get("hits", 0)]
            for f in client.faults()]
    return table(rows, ["ID", "BROKER", "API", "PARTITION", "ACTION", "REMAINING", "HITS"])


def cmd_fault_clear(client: ControlClient, args: argparse.Namespace) -> str:
    cleared = client.clear_faults(id=args.id, broker=args.broker)
    return f"cleared {cleared} fault(s)"


def cmd_fault_schedule(client: ControlClient, args: argparse.Namespace) -> str:
    """Apply a seed's fault schedule to the running cluster, in real time, printing each step;
    Ctrl-C ends it, its faults cleared and a stopped broker started."""
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else list(KINDS)
    try:
        brokers = args.brokers if args.brokers is not None else len(client.brokers())
        schedule = FaultSchedule.from_seed(args.seed, brokers=brokers,
                                           kinds=kinds, duration_s=args.duration,
                                           faults_per_s=args.rate)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.dry_run:
        return schedule.describe()
    print(schedule.describe(), flush=True)
    runner = ScheduleRunner(client, schedule, on_step=lambda line: print(line, flush=True))
    try:
        runner.run()
    except KeyboardInterrupt:
        runner.stop_faults()
        return f"seed {args.seed}: interrupted, its faults ended"
    return f"seed {args.seed}: {len(schedule.faults)} fault(s) applied and ended"


def _describe_disk_fault(f: dict) -> str:
    delay = [f"after {f[k]} {k.split('_')[1]}" for k in ("after_bytes", "after_ops")
             if f.get(k) is not None]
    files = f.get("files") or ["log"]
    kinds = "" if files == ["log"] else f" ({', '.join(files)} files)"
    where = f" in {f['log_dir']}" if f.get("log_dir") else ""
    return f"broker {f['broker']}{where} {f['operation']}{kinds}: {f['errno']}" + \
        (f" {' '.join(delay)}" if delay else "") + ", until cleared"


def cmd_disk_fault_add(client: ControlClient, args: argparse.Namespace) -> str:
    fault = client.add_disk_fault(args.broker, args.operation, args.errno,
                                  after_bytes=args.after_bytes, after_ops=args.after_ops,
                                  files=args.files.split(",") if args.files else None,
                                  log_dir=args.log_dir)
    return f"disk fault {fault['id']} added: {_describe_disk_fault(fault)}"


def cmd_disk_fault_list(client: ControlClient, args: argparse.Namespace) -> str:
    faults = client.disk_faults()
    per_dir = any(f.get("log_dir") for f in faults)  # a LOG_DIR column only when one names a dir
    rows = [[f["id"], f["broker"], f["operation"], f["errno"],
             "-" if f.get("after_bytes") is None else f["after_bytes"],
             "-" if f.get("after_ops") is None else f["after_ops"], f.get("hits", 0),
             ",".join(f.get("files") or ["log"]), *([f.get("log_dir") or "all"] if per_dir else [])]
            for f in faults]
    return table(rows, ["ID", "BROKER", "OPERATION", "ERRNO", "AFTER_BYTES", "AFTER_OPS", "HITS",
                        "FILES", *(["LOG_DIR"] if per_dir else [])])


def cmd_disk_fault_clear(client: ControlClient, args: argparse.Namespace) -> str:
    cleared = client.clear_disk_faults(id=args.id, broker=args.broker)
    return f"cleared {cleared} disk fault(s)"


def cmd_elect_leaders(client: ControlClient, args: argparse.Namespace) -> str:
    rows = [[p["topic"], p["partition"], p["leader"], p["replicas"][0], p["leader_epoch"]]
            for p in client.elect_preferred_leaders()]
    return table(rows, ["TOPIC", "PARTITION", "LEADER", "PREFERRED", "LEADER_EPOCH"])


def _clock_line(state: dict) -> str:
    wall = datetime.datetime.fromtimestamp(state["wall_ms"] / 1000, datetime.UTC)
    brokers = ",".join(str(b) for b in state.get("brokers", []))
    return (f"{'frozen' if state['frozen'] else 'running'}  broker time {state['now_ms']} ms  "
            f"wall {wall.isoformat(timespec='milliseconds')}  offset {state['offset_ms']:+d} ms  "
            f"brokers {brokers or '-'}")


def _clock_action(client: ControlClient, args: argparse.Namespace) -> dict:
    action = getattr(args, "action", None)
    if action == "freeze":
        return client.freeze_clock()
    if action == "advance":
        return client.advance_clock(args.ms)
    if action == "resume":
        return client.resume_clock()
    return client.clock()


def cmd_clock(client: ControlClient, args: argparse.Namespace) -> str:
    if getattr(args, "action", None) == "advance" and args.ms < 0:
        raise ControlError(None, "a clock cannot go back: MS must be >= 0")
    if not args.urls:
        return _clock_line(_clock_action(client, args))
    # One clock per broker process (ZooKeeper mode): the same command to each, in order.
    lines = []
    for url in args.urls.split(","):
        each = ControlClient(url.strip(), timeout=client.timeout, token=client.token)
        lines.append(f"{each.url}  {_clock_line(_clock_action(each, args))}")
    return "\n".join(lines)


def cmd_purgatory(client: ControlClient, args: argparse.Namespace) -> str:
    return _json(client.purgatory())


def _assigned(member: dict) -> str:
    assignment = member.get("assignment")
    if isinstance(assignment, dict):
        return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items())) or "-"
    return assignment or "-"


def group_detail(g: dict) -> str:
    lines = [f"group {g['group']}  coordinator {g['coordinator']}  state {g['state']}  "
             f"generation {g['generation']}  protocol {g['protocol_type'] or '-'}/{g['protocol'] or '-'}"]
    # A consumer group's members speak the consumer protocol, or the classic one (migration)
    members = [[m["member_id"] + (" *" if m["member_id"] == g["leader"] else ""),
                m.get("group_instance_id") or "-", m["client_id"], m["client_host"],
                m.get("member_type", "classic"), _assigned(m)]
               for m in g["members"]]
    lines += ["", table(members, ["MEMBER (* leader)", "INSTANCE", "CLIENT", "HOST", "TYPE",
                                  "ASSIGNMENT"])]
    offsets = [[o["topic"], o["partition"], o["committed_offset"],
                "-" if o["high_watermark"] is None else o["high_watermark"],
                "-" if o["lag"] is None else o["lag"]] for o in g["offsets"]]
    lines += ["", table(offsets, ["TOPIC", "PARTITION", "COMMITTED", "HIGH_WATERMARK", "LAG"])]
    return "\n".join(lines)


def cmd_groups(client: ControlClient, args: argparse.Namespace) -> str:
    if args.json:
        return _json(client.groups(args.group))
    if args.group is not None:
        return "\n\n".join(group_detail(g) for g in client.groups(args.group))
    rows = [[g["group"], g["coordinator"], g["state"], g["generation"],
             g["protocol"] or "-", len(g["members"]),
             sum(o["lag"] or 0 for o in g["offsets"])] for g in client.groups()]
    return table(rows, ["GROUP", "COORDINATOR", "STATE", "GENERATION", "PROTOCOL", "MEMBERS",
                        "TOTAL_LAG"])


def _partitions(t: dict) -> str:
    by_topic: dict[str, list[str]] = {}
    for p in t["partitions"]:
        by_topic.setdefault(p["topic"], []).append(str(p["partition"]))
    return " ".join(f"{topic}:{','.join(ps)}" for topic, ps in by_topic.items()) or "-"


def cmd_transactions(client: ControlClient, args: argparse.Namespace) -> str:
    found = client.transactions(args.transactional_id)
    if args.json:
        return _json(found)
    rows = [[t["transactional_id"], t["coordinator"],
             t["state"] + (f" -> {t['pending_state']}" if t["pending_state"] else ""),
             t["producer_id"], t["producer_epoch"],
             t["start_timestamp"] if t["start_timestamp"] >= 0 else "-", t["timeout_ms"],
             _partitions(t)] for t in found]
    return table(rows, ["TRANSACTIONAL_ID", "COORDINATOR", "STATE", "PRODUCER_ID", "EPOCH",
                        "START_MS", "TIMEOUT_MS", "PARTITIONS"])


def cmd_users(client: ControlClient, args: argparse.Namespace) -> str:
    found = client.users()
    rows = [[u["user"], ", ".join(f"{m} ({n} iterations)" for m, n in u["mechanisms"].items())]
            for u in found]
    return table(rows, ["USER", "SCRAM CREDENTIALS"])


def cmd_users_set(client: ControlClient, args: argparse.Namespace) -> str:
    password = args.password if args.password is not None else getpass.getpass(
        f"password for {args.user}: ")
    user = client.set_user(args.user, password, args.mechanism, args.iterations)
    return f"{user['user']}: " + ", ".join(user["mechanisms"])


def cmd_users_delete(client: ControlClient, args: argparse.Namespace) -> str:
    client.delete_user(args.user, args.mechanism)
    return f"{args.user}: {args.mechanism} deleted"


Command = Callable[[ControlClient, argparse.Namespace], str]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Control a running kafka-sim cluster.")
    parser.add_argument("--url", default=os.environ.get(URL_ENV) or DEFAULT_URL,
                        help=f"control API address (default: ${URL_ENV} or {DEFAULT_URL})")
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV, ""),
                        help=f"the broker's control.token, if it has one (default: ${TOKEN_ENV})")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def leaf(sub, name: str, run: Command, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(run=run)
        return p

    leaf(commands, "brokers", cmd_brokers, "list brokers: address, alive, controller and epoch")
    broker = commands.add_parser("broker", help="stop or start a broker").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    leaf(broker, "stop", cmd_broker_stop, "stop a broker as a crash would").add_argument(
        "id", type=int)
    leaf(broker, "start", cmd_broker_start, "start a stopped broker").add_argument("id", type=int)
    leaf(commands, "partitions", cmd_partitions,
         "partitions as JSON: leader, epoch, ISR, replicas with LEO/HW/LSO/lag, producers").add_argument(
        "topic", nargs="?")
    replication = commands.add_parser(
        "replication", help="pause or resume a broker's followers").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    leaf(replication, "pause", cmd_replication_pause,
         "stop this broker's followers fetching").add_argument("id", type=int)
    leaf(replication, "resume", cmd_replication_resume,
         "let this broker's followers fetch again").add_argument("id", type=int)

    fault = commands.add_parser("fault", help="inject, list and clear faults").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    add = leaf(fault, "add", cmd_fault_add, "make a broker fail matching requests")
    add.add_argument("--broker", type=int, required=True, metavar="ID", help="broker id")
    add.add_argument("--api", required=True, metavar="NAME",
                     help="API name or key, e.g. Produce, Fetch, 0")
    add.add_argument("--partition", metavar="T:P", help="only requests touching TOPIC:PARTITION")
    action = add.add_mutually_exclusive_group(required=True)
    action.add_argument("--error", metavar="CODE_OR_NAME",
                        help="answer with this error (code or name)")
    action.add_argument("--drop-response", action="store_true",
                        help="process the request, then close the connection without answering")
    action.add_argument("--disconnect", action="store_true",
                        help="close the connection without processing")
    action.add_argument("--delay-ms", type=int, metavar="MS", help="wait MS before processing")
    add.add_argument("--count", type=int, metavar="N",
                     help="apply N times (default: until cleared)")
    leaf(fault, "list", cmd_fault_list, "list active faults")
    schedule = leaf(fault, "schedule", cmd_fault_schedule,
                    "apply the faults a seed schedules (delays, errors, dropped answers, closed "
                    "connections, broker restarts), in real time")
    schedule.add_argument("--seed", type=int, required=True, metavar="N")
    schedule.add_argument("--duration", type=float, default=30.0, metavar="S",
                          help="seconds the schedule spans (default 30)")
    schedule.add_argument("--rate", type=float, default=0.5, metavar="R",
                          help="faults a second (default 0.5)")
    schedule.add_argument("--kinds", metavar="K,K", help="among delay, error, drop, "
                          "disconnect, restart (default: all)")
    schedule.add_argument("--brokers", type=int, metavar="N",
                          help="brokers to schedule for (default: the cluster's)")
    schedule.add_argument("--dry-run", action="store_true",
                          help="print the schedule without applying it")
    clear = leaf(fault, "clear", cmd_fault_clear, "clear one fault, a broker's, or all")
    clear.add_argument("--id", type=int, metavar="N", help="only this fault")
    clear.add_argument("--broker", type=int, metavar="ID", help="only this broker's faults")
    disk = commands.add_parser(
        "disk-fault", help="make a broker's log dir fail writes or fsyncs").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    add = leaf(disk, "add", cmd_disk_fault_add,
               "fail a broker's log-dir writes or fsyncs with an errno (the broker takes its "
               "log dir offline; it halts when no dir is left)")
    add.add_argument("--broker", type=int, required=True, metavar="ID", help="broker id")
    add.add_argument("--operation", required=True, choices=["write", "fsync"])
    add.add_argument("--errno", required=True, metavar="NAME", help="ENOSPC, EIO, ...")
    add.add_argument("--after-bytes", type=int, metavar="N",
                     help="write N more bytes first (the write crossing N is partial)")
    add.add_argument("--after-ops", type=int, metavar="N", help="let N more calls succeed first")
    add.add_argument("--files", metavar="KINDS",
                     help="comma-separated kinds of file it hits: log (the default), index, "
                          "checkpoint, cleaner, or all")
    add.add_argument("--log-dir", metavar="DIR",
                     help="only this one of the broker's log.dirs (default: all of them)")
    leaf(disk, "list", cmd_disk_fault_list, "list armed disk faults")
    clear = leaf(disk, "clear", cmd_disk_fault_clear, "clear one disk fault, a broker's, or all")
    clear.add_argument("--id", type=int, metavar="N", help="only this fault")
    clear.add_argument("--broker", type=int, metavar="ID", help="only this broker's faults")
    leaf(commands, "elect-leaders", cmd_elect_leaders,
         "move leadership to each partition's preferred replica where it is in the ISR")
    clock = leaf(commands, "clock", cmd_clock,
                 "the virtual clock every broker timeout follows: show, freeze, advance, resume")
    clock_actions = clock.add_subparsers(dest="action", metavar="ACTION")
    clock_leaves = [
        leaf(clock_actions, "freeze", cmd_clock, "stop time: timeouts fire only when advanced"),
        leaf(clock_actions, "advance", cmd_clock,
             "move time forward; what came due (sessions, requests, transactions) fires at once"),
        leaf(clock_actions, "resume", cmd_clock, "let time run again from where it stands"),
    ]
    clock_leaves[1].add_argument("ms", type=int, metavar="MS")
    for p in [clock, *clock_leaves]:
        p.add_argument("--urls", metavar="URL,URL", default=argparse.SUPPRESS if p is not clock
                       else None, help="several broker processes' control APIs (ZooKeeper mode: "
                                       "each process has its own clock); --url otherwise")
    leaf(commands, "purgatory", cmd_purgatory,
         "purgatory and timer statistics per broker, as JSON")
    groups = leaf(commands, "groups", cmd_groups,
                  "consumer groups: state, generation, members, committed offsets and lag")
    groups.add_argument("group", nargs="?", help="show this group in detail")
    groups.add_argument("--json", action="store_true", help="print the API's JSON")
    transactions = leaf(commands, "transactions", cmd_transactions,
                        "transactional ids: state, producer id and epoch, partitions, start, timeout")
    transactions.add_argument("transactional_id", nargs="?", help="only this transactional id")
    transactions.add_argument("--json", action="store_true", help="print the API's JSON")
    users = commands.add_parser(
        "users", help="SCRAM users (what SASL/SCRAM logins are checked against)").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    leaf(users, "list", cmd_users, "users and their SCRAM mechanisms")
    set_user = leaf(users, "set", cmd_users_set, "create a user or change its password")
    delete_user = leaf(users, "delete", cmd_users_delete, "delete a user's credential")
    for p in (set_user, delete_user):
        p.add_argument("user")
        p.add_argument("--mechanism", default="SCRAM-SHA-256",
                       choices=["SCRAM-SHA-256", "SCRAM-SHA-512"])
    set_user.add_argument("--password", help="the password (default: asked for)")
    set_user.add_argument("--iterations", type=int, default=4096, help="PBKDF2 rounds (4096-16384)")
    return parser


def main(argv: list[str]) -> int:
    """Run one ctl command; 0 on success, 1 when the API refuses or is unreachable, 2 on usage."""
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        print(args.run(ControlClient(args.url, token=args.token), args))
    except ControlError as exc:
        print(f"{PROG}: {exc.message}", file=sys.stderr)
        return 1
    except UsageError as exc:  # an argument only the command can judge
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
