"""`kafka-sim groups`: list, describe, reset the offsets of and delete consumer groups, with the
columns of Kafka's kafka-consumer-groups.sh."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kafka import KafkaAdminClient, TopicPartition, errors
from kafka.admin import OffsetSpec
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from broker.tools.command import ToolError, UsageError, connect, one_action, parser, run
from broker.tools.consumer_group_describe import (
    describe_consumer_groups,
    share_group_start_offsets,
)

PROG = "kafka-sim groups"
ACTIONS = ("list", "describe", "reset_offsets", "delete")
RESET_TARGETS = ("to_earliest", "to_latest", "to_offset", "shift_by")
# Kafka lets offsets be reset only while nobody consumes them.
INACTIVE_STATES = ("Empty", "Dead")
RETRY_BACKOFF_S = 0.1
T = TypeVar("T")


def _parser() -> argparse.ArgumentParser:
    p = parser(PROG, "List, describe, reset the offsets of or delete consumer groups (as "
                     "kafka-consumer-groups.sh).")
    p.add_argument("--list", action="store_true", help="the groups' ids (with --state: and states)")
    p.add_argument("--describe", action="store_true",
                   help="offsets and lag per partition (--state: the group; --members: members)")
    p.add_argument("--reset-offsets", action="store_true",
                   help="set the group's committed offsets (only while it has no members)")
    p.add_argument("--delete", action="store_true", help="delete groups without members")
    p.add_argument("--group", action="append", default=[], help="the group (repeatable)")
    p.add_argument("--all-groups", action="store_true",
                   help="with --describe or --delete: every group of the cluster")
    p.add_argument("--state", action="store_true", help="with --describe or --list: states")
    p.add_argument("--members", action="store_true", help="with --describe: the members")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="--reset-offsets: a topic, or some of its partitions (repeatable)")
    p.add_argument("--all-topics", action="store_true",
                   help="--reset-offsets: every topic the group has offsets for")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-offset", type=int, metavar="N")
    p.add_argument("--shift-by", type=int, metavar="N", help="move the committed offsets by N")
    p.add_argument("--dry-run", action="store_true", help="show the new offsets (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    return p


def main(argv: list[str]) -> int:
    return run(PROG, _main, argv)


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    action = one_action(args, ACTIONS)
    if args.all_groups and (action not in ("describe", "delete") or args.group):
        raise UsageError("--all-groups goes with --describe or --delete, without --group")
    if action != "list" and not args.group and not args.all_groups:
        raise UsageError(f"--{action.replace('_', '-')} needs --group")
    if args.members and (action != "describe" or args.state):
        raise UsageError("--members goes with --describe (and not with --state)")
    if action == "reset_offsets":
        _check_reset_options(args)
    admin = connect(KafkaAdminClient, args)
    try:
        if args.all_groups:
            args.group = sorted(g["group_id"] for g in _retrying(args, admin.list_groups))
            if not args.group:
                return 0
        text, code = {"list": _list, "describe": _describe, "reset_offsets": _reset,
                      "delete": _delete}[action](admin, args)
    finally:
        admin.close()
    if text:
        print(text)
    return code


def _check_reset_options(args: argparse.Namespace) -> None:
    targets = [t for t in RESET_TARGETS if getattr(args, t) not in (None, False)]
    if len(targets) != 1:
        raise UsageError("--reset-offsets needs one of --to-earliest, --to-latest, --to-offset "
                         "or --shift-by")
    if bool(args.topic) == args.all_topics:
        raise UsageError("--reset-offsets needs --topic or --all-topics")
    if args.dry_run and args.execute:
        raise UsageError("--dry-run and --execute go separately")
    if len(args.group) != 1:
        raise UsageError("--reset-offsets takes one --group")


def _retrying(args: argparse.Namespace, call: Callable[..., T], *a) -> T:
    """Call the admin client, again while the coordinator is not ready (a group's coordinator
    loads its partition of __consumer_offsets first), up to the connect timeout."""
    deadline = time.monotonic() + args.connect_timeout_ms / 1000
    while True:
        try:
            return call(*a)
        except KafkaError as exc:
            if not exc.retriable or time.monotonic() >= deadline:
                raise
        time.sleep(RETRY_BACKOFF_S)


def table(rows: list[list[object]], header: list[str]) -> str:
    """Columns padded to their widest cell, after an empty line (as Kafka's tool prints them)."""
    cells = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n" + "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                            for r in cells)


# --- --list ------------------------------------------------------------------------------------

def _list(admin, args: argparse.Namespace) -> tuple[str, int]:
    groups = sorted(_retrying(args, admin.list_groups), key=lambda g: g["group_id"])
    if args.state:
        return table([[g["group_id"], g.get("group_state") or "-"] for g in groups],
                     ["GROUP", "STATE"]), 0
    return "\n".join(g["group_id"] for g in groups), 0


# --- --describe --------------------------------------------------------------------------------

@dataclass(slots=True)
class _Member:
    consumer_id: str
    host: str
    client_id: str
    partitions: list[tuple[str, int]]


def _members(group: dict) -> list[_Member]:
    members = []
    for m in group["members"]:
        assignment = m.get("member_assignment") or {}
        parts = [(a["topic"], p) for a in assignment.get("assigned_partitions", [])
                 for p in a["partitions"]]
        members.append(_Member(m["member_id"], m["client_host"], m["client_id"], sorted(parts)))
    return members


def _described(admin, args: argparse.Namespace, group_ids: list[str]) -> dict[str, dict]:
    """Each group as describe_groups shows it; a KIP-848 group as ConsumerGroupDescribe does."""
    described = _retrying(args, admin.describe_groups, group_ids)
    described.update(describe_consumer_groups(args.bootstrap_server.split(","), group_ids,
                                              args.connect_timeout_ms / 1000, args.client_id))
    return described


def _describe(admin, args: argparse.Namespace) -> tuple[str, int]:
    described = _described(admin, args, args.group)
    out: list[str] = []
    code = 0
    for group_id in args.group:
        group = described[group_id]
        if group["group_state"] == "Dead":
            print(f"{PROG}: consumer group '{group_id}' does not exist", file=sys.stderr)
            code = 1
            continue
        if args.state:
            out.append(_state_table(admin, group))
            continue
        members = _members(group)
        if not members:
            out.append(f"\nConsumer group '{group_id}' has no active members.")
        elif group["group_state"] in ("PreparingRebalance", "CompletingRebalance", "Assigning",
                                      "Reconciling"):
            out.append(f"\nWarning: consumer group '{group_id}' is rebalancing.")
        if args.members:
            out.append(_members_table(group_id, members))
        elif group.get("type") == "share":
            out.append(_share_offsets_table(args, group_id, members))
        else:
            out.append(_offsets_table(admin, args, group_id, members))
    return "\n".join(out).lstrip("\n") if out else "", code


def _state_table(admin, group: dict) -> str:
    coordinator = _coordinator(admin, group["group_id"])
    return table([[group["group_id"], coordinator, group["protocol_data"] or "-",
                   group["group_state"], len(group["members"])]],
                 ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"])


def _coordinator(admin, group_id: str) -> str:
    """host:port (id) of the group's coordinator, which describe_groups has just found."""
    try:  # kafka-python keeps it in its cluster metadata; no public call returns it
        cluster = admin._manager.cluster
        node_id = cluster.get_coordinator(group_id)
        broker = cluster.broker_metadata(node_id)
        return f"{broker.host}:{broker.port} ({node_id})"
    except Exception:  # a kafka-python without that cache: say so rather than fail
        return "-"


def _members_table(group_id: str, members: list[_Member]) -> str:
    rows = [[group_id, m.consumer_id, m.host, m.client_id, len(m.partitions)] for m in members]
    return table(rows, ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"])


def _offsets_table(admin, args: argparse.Namespace, group_id: str,
                   members: list[_Member]) -> str:
    committed = _retrying(args, admin.list_group_offsets, group_id)[group_id]
    owner = {tp: m for m in members for tp in m.partitions}
    partitions = sorted({(tp.topic, tp.partition) for tp in committed} | set(owner))
    ends = _offsets(admin, [TopicPartition(t, p) for t, p in partitions], latest=True)
    rows: list[list[object]] = []
    for topic, partition in partitions:
        tp = TopicPartition(topic, partition)
        current = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
        end = ends.get(tp)
        lag = end - current if current is not None and end is not None else "-"
        m = owner.get((topic, partition))
        rows.append([group_id, topic, partition, "-" if current is None else current,
                     "-" if end is None else end, lag, m.consumer_id if m else "-",
                     m.host if m else "-", m.client_id if m else "-"])
    rows.extend([group_id, "-", "-", "-", "-", "-", m.consumer_id, m.host, m.client_id]
                for m in members if not m.partitions)
    return table(rows, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                        "CONSUMER-ID", "HOST", "CLIENT-ID"])


def _share_offsets_table(args: argparse.Namespace, group_id: str,
                         members: list[_Member]) -> str:
    """A share group's partitions with their start offset, as kafka-share-groups shows them
    (the members share partitions: no owner column)."""
    starts = share_group_start_offsets(args.bootstrap_server.split(","), group_id,
                                       args.connect_timeout_ms / 1000, args.client_id)
    partitions = sorted(set(starts) | {tp for m in members for tp in m.partitions})
    rows = [[group_id, t, p, starts.get((t, p), -1) if starts.get((t, p), -1) >= 0 else "-"]
            for t, p in partitions]
    return table(rows, ["GROUP", "TOPIC", "PARTITION", "START-OFFSET"])


def _offsets(admin, partitions: list, *, latest: bool) -> dict:
    """Each partition's log end offset (latest) or log start offset."""
    if not partitions:
        return {}
    spec = OffsetSpec.LATEST if latest else OffsetSpec.EARLIEST
    try:
        found = admin.list_partition_offsets({tp: spec for tp in partitions})
    except KafkaError:  # one of them is gone (a group keeps the offsets of a deleted topic)
        found = {}
        for tp in partitions:
            try:
                found.update(admin.list_partition_offsets({tp: spec}))
            except KafkaError:
                continue  # shown as "-"
    return {tp: o.offset for tp, o in found.items()}


# --- --reset-offsets ---------------------------------------------------------------------------

def _reset(admin, args: argparse.Namespace) -> tuple[str, int]:
    (group_id,) = args.group
    group = _described(admin, args, [group_id])[group_id]
    if group["group_state"] not in INACTIVE_STATES:
        raise ToolError(f"offsets can only be reset while group '{group_id}' is inactive, but "
                        f"its state is {group['group_state']}")
    committed = {tp: o.offset for tp, o in
                 _retrying(args, admin.list_group_offsets, group_id)[group_id].items()
                 if o.offset >= 0}
    partitions = sorted(_reset_partitions(admin, args, committed))
    earliest = _offsets(admin, partitions, latest=False)
    latest = _offsets(admin, partitions, latest=True)
    new: dict = {}
    for tp in partitions:
        if args.to_earliest:
            target = earliest[tp]
        elif args.to_latest:
            target = latest[tp]
        elif args.to_offset is not None:
            target = args.to_offset
        else:
            if tp not in committed:
                raise ToolError(f"cannot shift the offset of {tp.topic}-{tp.partition}: "
                                f"group '{group_id}' has none committed")
            target = committed[tp] + args.shift_by
        new[tp] = min(max(target, earliest[tp]), latest[tp])  # Kafka clamps to the log's range
        if new[tp] != target:
            bound = "log end" if target > latest[tp] else "log start"
            print(f"{PROG}: offset {target} of {tp.topic}-{tp.partition} is past its {bound} "
                  f"offset: {new[tp]} instead", file=sys.stderr)
    if args.execute:
        errors = _retrying(args, admin.alter_group_offsets, group_id,
                           {tp: OffsetAndMetadata(o, "", None) for tp, o in new.items()})
        failed = {tp: e for tp, e in errors.items() if getattr(e, "errno", 0)}
        if failed:
            tp, error = next(iter(failed.items()))
            raise ToolError(f"resetting {tp.topic}-{tp.partition} failed: {error.message}")
    rows = [[group_id, tp.topic, tp.partition, offset] for tp, offset in new.items()]
    text = table(rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])
    if not args.execute and not args.dry_run:  # as Kafka: no --execute is a dry run, said so
        print(f"{PROG}: no --execute: a dry run, nothing was changed", file=sys.stderr)
    return text.lstrip("\n"), 0


def _reset_partitions(admin, args: argparse.Namespace, committed: dict) -> set:
    """The partitions `--topic T[:P,...]` or `--all-topics` name."""
    if args.all_topics:
        return set(committed)
    chosen = set()
    for spec in args.topic:
        topic, _, listed = spec.partition(":")
        described = admin.describe_topics([topic])
        if not described or described[0]["error_code"] or not described[0]["partitions"]:
            raise ToolError(f"topic '{topic}' does not exist")
        known = {p["partition_index"] for p in described[0]["partitions"]}
        try:
            wanted = {int(p) for p in listed.split(",")} if listed else known
        except ValueError:
            raise UsageError(f"--topic {spec!r}: partitions are numbers (T:0,1)") from None
        if wanted - known:
            raise ToolError(f"topic '{topic}' has no partition {min(wanted - known)}")
        chosen.update(TopicPartition(topic, p) for p in wanted)
    return chosen


# --- --delete ----------------------------------------------------------------------------------

def _delete(admin, args: argparse.Namespace) -> tuple[str, int]:
    results = _retrying(args, admin.delete_groups, args.group)
    failed = {g: r for g, r in results.items() if r != "OK"}
    for group_id, error in failed.items():
        name = getattr(getattr(errors, error, None), "message", error)
        print(f"{PROG}: group '{group_id}' could not be deleted: {name}", file=sys.stderr)
    deleted = [g for g in args.group if g not in failed]
    if not deleted:
        return "", 1
    names = ", ".join(f"'{g}'" for g in deleted)
    return f"Deletion of requested consumer groups ({names}) was successful.", 1 if failed else 0
