"""`kafka-sim topics`: list, create, describe, delete and grow topics, with the output layout of
Kafka's kafka-topics.sh."""

from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from broker.tools.command import (
    ToolError,
    UsageError,
    connect,
    one_action,
    parser,
    properties,
    run,
)

PROG = "kafka-sim topics"
ACTIONS = ("list", "create", "describe", "delete", "alter")


def _parser() -> argparse.ArgumentParser:
    p = parser(PROG, "Create, delete, describe, grow or list topics (as kafka-topics.sh).")
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true", help=f"{action} topics")
    p.add_argument("--topic", help="the topic (for --describe/--delete/--alter: a regular "
                   "expression of names, as Kafka's)")
    p.add_argument("--partitions", type=int, help="partitions of a new topic, or the new count "
                   "for --alter (default for --create: the broker's num.partitions)")
    p.add_argument("--replication-factor", type=int,
                   help="replicas of each partition (default: default.replication.factor)")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="a topic config of a new topic (repeatable)")
    p.add_argument("--if-exists", action="store_true",
                   help="--alter/--delete/--describe: do nothing when no topic matches")
    p.add_argument("--if-not-exists", action="store_true",
                   help="--create: do nothing when the topic exists")
    p.add_argument("--exclude-internal", action="store_true",
                   help="leave out internal topics (__consumer_offsets, __transaction_state)")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="--describe: only partitions whose ISR is smaller than their replicas")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="--describe: only partitions without a live leader")
    return p


def main(argv: list[str]) -> int:
    return run(PROG, _main, argv)


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    action = one_action(args, ACTIONS)
    if action in ("create", "delete", "alter") and not args.topic:
        raise UsageError(f"--{action} needs --topic")
    if action == "alter" and args.partitions is None:
        raise UsageError("--alter needs --partitions (configs are changed with AlterConfigs)")
    if (args.under_replicated_partitions or args.unavailable_partitions) and action != "describe":
        raise UsageError("--under-replicated-partitions and --unavailable-partitions go with "
                         "--describe")
    configs = properties(args.config, "--config")
    if configs and action != "create":
        raise UsageError("--config goes with --create")
    admin = connect(KafkaAdminClient, args)
    try:
        out = {"list": _list, "create": _create, "describe": _describe, "delete": _delete,
               "alter": _alter}[action](admin, args)
    finally:
        admin.close()
    if out:
        print(out)
    return 0


def _topics(admin, args: argparse.Namespace) -> list[dict]:
    """Every topic's metadata, sorted by name, internal ones left out if asked."""
    topics = sorted(admin.describe_topics(), key=lambda t: t["name"])
    return [t for t in topics if not (args.exclude_internal and t["is_internal"])]


def _matching(admin, args: argparse.Namespace) -> list[dict]:
    """The topics `--topic` names (a regular expression, as Kafka's); none: an error, unless
    --if-exists."""
    topics = _topics(admin, args)
    if args.topic is None:
        return topics
    try:
        pattern = re.compile(args.topic)
    except re.error as exc:
        raise UsageError(f"--topic {args.topic!r} is no regular expression: {exc}") from None
    found = [t for t in topics if pattern.fullmatch(t["name"])]
    if not found and not args.if_exists:
        raise ToolError(f"topic '{args.topic}' does not exist")
    return found


def _list(admin, args: argparse.Namespace) -> str:
    return "\n".join(t["name"] for t in _topics(admin, args))


def _check(result, key: str) -> None:
    """Raise the first per-topic error of a CreateTopics/CreatePartitions/DeleteTopics answer."""
    if not isinstance(result, dict):  # kafka-python hands some answers back undecoded
        result = result.to_dict()
    for topic in result.get(key, []):
        if topic["error_code"]:
            error = for_code(topic["error_code"])
            detail = topic.get("error_message") or error.description
            raise ToolError(f"{error.message} for topic '{topic['name']}': {detail}")


def _create(admin, args: argparse.Namespace) -> str:
    spec = {"num_partitions": -1 if args.partitions is None else args.partitions,
            "replication_factor": -1 if args.replication_factor is None
            else args.replication_factor,
            "configs": properties(args.config, "--config")}
    result = admin.create_topics({args.topic: spec}, raise_errors=False)
    codes = [t["error_code"] for t in result["topics"]]
    if args.if_not_exists and codes == [TopicAlreadyExistsError.errno]:
        return ""
    _check(result, "topics")
    return f"Created topic {args.topic}."


def _delete(admin, args: argparse.Namespace) -> str:
    topics = _matching(admin, args)
    internal = [t["name"] for t in topics if t["is_internal"]]
    if internal:
        raise ToolError(f"topic {internal[0]} is an internal topic and may not be deleted")
    if topics:
        result = admin.delete_topics([t["name"] for t in topics], raise_errors=False)
        _check(result, "responses")
    return ""


def _alter(admin, args: argparse.Namespace) -> str:
    topics = _matching(admin, args)
    if topics:
        result = admin.create_partitions({t["name"]: args.partitions for t in topics},
                                         raise_errors=False)
        _check(result, "results")
    return ""


def _describe(admin, args: argparse.Namespace) -> str:
    topics = _matching(admin, args)
    if not topics:
        return ""
    if args.under_replicated_partitions or args.unavailable_partitions:
        return _partition_report(topics, args)
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, t["name"]) for t in topics])
    overrides = described.get("topic", {})
    moves = _reassignments(admin, topics)
    lines: list[str] = []
    for topic in topics:
        partitions = sorted(topic["partitions"], key=lambda p: p["partition_index"])
        configs = ",".join(f"{name}={c['value']}"
                           for name, c in sorted(overrides.get(topic["name"], {}).items()))
        factor = 0
        if partitions:  # as Kafka: a move's leaving replicas do not count
            first = partitions[0]
            leaving = moves.get((topic["name"], first["partition_index"]), {}).get(
                "removing_replicas", [])
            factor = len(first["replica_nodes"]) - len(leaving)
        lines.append(f"Topic: {topic['name']}\tTopicId: {_kafka_uuid(topic['topic_id'])}\t"
                     f"PartitionCount: {len(partitions)}\tReplicationFactor: {factor}\t"
                     f"Configs: {configs}")
        lines.extend(_partition_line(topic["name"], p,
                                     moves.get((topic["name"], p["partition_index"])))
                     for p in partitions)
    return "\n".join(lines)


def _reassignments(admin, topics: list[dict]) -> dict[tuple[str, int], dict]:
    """The moves under way (KIP-455) among these topics' partitions, by (topic, partition)."""
    names = {t["name"] for t in topics}
    try:
        found = admin.list_partition_reassignments()  # all of them: there are seldom many
    except KafkaError:  # a broker without the API: describe without the moves
        return {}
    return {(tp.topic, tp.partition): move for tp, move in found.items() if tp.topic in names}


def _partition_report(topics: list[dict], args: argparse.Namespace) -> str:
    """Only the partitions a report option picks, without their topic's line (as Kafka)."""
    def picked(p: dict) -> bool:
        under = len(p["isr_nodes"]) < len(p["replica_nodes"])
        unavailable = p["leader_id"] < 0 or p["leader_id"] in (p.get("offline_replicas") or [])
        return (args.under_replicated_partitions and under) or (
            args.unavailable_partitions and unavailable)

    return "\n".join(_partition_line(t["name"], p) for t in topics
                     for p in sorted(t["partitions"], key=lambda p: p["partition_index"])
                     if picked(p))


def _partition_line(topic: str, p: dict, move: dict | None = None) -> str:
    leader = "none" if p["leader_id"] < 0 else str(p["leader_id"])
    line = (f"\tTopic: {topic}\tPartition: {p['partition_index']}\tLeader: {leader}\t"
            f"Replicas: {_ids(p['replica_nodes'])}\tIsr: {_ids(p['isr_nodes'])}")
    if move is not None:
        line += (f"\tAdding Replicas: {_ids(move['adding_replicas'])}"
                 f"\tRemoving Replicas: {_ids(move['removing_replicas'])}")
    if p.get("offline_replicas"):
        line += f"\tOffline: {_ids(p['offline_replicas'])}"
    return line


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def _kafka_uuid(topic_id: str | None) -> str:
    """A topic id as Kafka prints it: the 16 bytes in URL-safe base64 without padding."""
    if not topic_id:
        return "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID
    raw = uuid.UUID(str(topic_id)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
