"""One chaos run from start to verdict: a 3-broker multi-process cluster, the workload under a
seeded chaos monkey for a bounded time, healing, then the read-back, replica and Spark checks."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from broker.metadata.topic_names import OFFSETS_TOPIC
from tests.chaos.monkey import ChaosMonkey
from tests.chaos.verdict import (
    caught_up,
    committed_offsets,
    healed,
    judge_read_back,
    partition_states,
    read_back,
    replica_divergence,
    resent_under_a_new_epoch,
    spark_audit,
)
from tests.chaos.workload import RATE_PER_S, ChaosProducer, GroupMember
from tests.process_cluster import ProcessCluster, wait_until

TOPIC, PARTITIONS, GROUP = "chaos", 6, "chaos-group"
SEED_ENV = "CHAOS_SEED"
HEAL_S = 120.0


def chaos_seed() -> int:
    """CHAOS_SEED replays a run; otherwise a fresh seed (printed, so a failure can be replayed)."""
    return int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**32))


@dataclass
class ChaosReport:
    seed: int
    seconds: float = 0.0
    faults: Counter = field(default_factory=Counter)
    stuck: list[str] = field(default_factory=list)
    sent: int = 0
    acknowledged: int = 0
    implicit_acks: int = 0  # acknowledged by librdkafka without an offset
    unacknowledged_after_flush: int = 0
    delivery_errors: list = field(default_factory=list)
    fatal_errors: list[str] = field(default_factory=list)
    lost: int = 0
    misplaced: int = 0
    duplicated: int = 0
    resent_after_epoch_bump: int = 0  # of the duplicated: the client re-sent them, new epoch
    in_log_unacknowledged: int = 0
    not_consumed: int = 0
    committed_behind: dict[int, tuple[int, int]] = field(default_factory=dict)  # p: (committed, end)
    divergence: list[str] = field(default_factory=list)
    audit: tuple[int, int, int, int] = (-1, -1, -1, -1)  # exit code, partitions, records, violations
    audit_output: str = ""
    records_on_disk: int = 0
    examples: dict[str, list] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """Everything that breaks the promise; empty when the run passed."""
        out = []
        checks = [
            (self.fatal_errors, f"producer fatal errors: {self.fatal_errors[:3]}"),
            (self.delivery_errors, f"delivery errors: {self.delivery_errors[:3]}"),
            (self.unacknowledged_after_flush, f"{self.unacknowledged_after_flush} records never acknowledged"),
            (self.lost, f"{self.lost} acknowledged records lost {self.examples.get('lost')}"),
            (self.misplaced, f"{self.misplaced} records not at their acknowledged offset {self.examples.get('misplaced')}"),
            (self.duplicated - self.resent_after_epoch_bump,
             f"{self.duplicated - self.resent_after_epoch_bump} records duplicated by the broker {self.examples.get('duplicated')}"),
            (self.in_log_unacknowledged, f"{self.in_log_unacknowledged} records in the log never acknowledged"),
            (self.not_consumed, f"{self.not_consumed} acknowledged records the group never read"),
            (self.committed_behind, f"committed offsets not at the log end: {self.committed_behind}"),
            (self.divergence, f"replicas differ: {self.divergence[:5]}"),
            (self.audit[0] != 0 or self.audit[3] != 0, f"Spark audit {self.audit}: {self.audit_output[-3000:]}"),
            (self.audit[2] != self.records_on_disk, f"audit counted {self.audit[2]} records, the segments hold {self.records_on_disk}"),
        ]  # fmt: skip
        out += [message for failed, message in checks if failed]
        return out

    def summary(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        return (f"chaos seed {self.seed}: {self.seconds:.0f} s of faults ({faults}); "
                f"{self.sent} records sent, {self.acknowledged} acknowledged ({self.implicit_acks} without "
                f"offset), {self.lost} lost, "
                f"{self.duplicated} duplicated ({self.resent_after_epoch_bump} re-sent by the client "
                f"under a bumped epoch), {len(self.divergence)} replica divergences; "
                f"audit: {self.audit[1]} partitions, {self.audit[2]} records, {self.audit[3]} violations; "
                f"stuck after: {self.stuck or 'none'}")  # fmt: skip


def _create_topic(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, topic_configs={
        "min.insync.replicas": "2", "segment.bytes": "65536"})])  # several segments per partition
    admin.close()


def _compact_offsets_often(bootstrap: str) -> None:
    """Small segments for `__consumer_offsets` (100 MiB by default) so the log cleaner compacts it
    during the chaos: coordinators then load, and followers copy, compacted logs."""
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, OFFSETS_TOPIC, configs={
        "cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.1"})])
    admin.close()


def run_chaos(zk_connect: str, root: Path, seconds: float, seed: int,
              log: Callable[[str], None] = print, rate_per_s: int = RATE_PER_S,
              compression: str = "lz4") -> ChaosReport:
    report = ChaosReport(seed)
    log(f"chaos: seed {seed} (replay with {SEED_ENV}={seed}), {seconds:.0f} s, data in {root}")
    cluster = ProcessCluster(zk_connect, root, 3, overrides={
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5",
        "log.cleaner.backoff.ms": "1000",  # the cleaner and the preferred-leader election run
        "leader.imbalance.check.interval.seconds": "5"})  # during the chaos, not after it
    cluster.start()
    members: list[GroupMember] = []
    producer: ChaosProducer | None = None
    monkey: ChaosMonkey | None = None
    try:
        all_brokers = set(cluster.ids)
        for i in cluster.ids:
            wait_until(lambda i=i: sum(b["alive"] for b in cluster.brokers(i)) == 3, f"broker {i} sees 3")
        _create_topic(cluster.bootstrap)
        producer = ChaosProducer(cluster.bootstrap, TOPIC, rate_per_s, compression,
                                 root / "producer.log").start()
        members = [GroupMember(cluster.bootstrap, TOPIC, GROUP, f"member-{client}", client).start()
                   for client in ("confluent-kafka", "kafka-python")]  # fmt: skip
        wait_until(lambda: len(producer.acked) > 0 and healed(cluster, all_brokers)
                   and OFFSETS_TOPIC in {p["topic"] for p in partition_states(cluster, all_brokers)},
                   "the topic, the group's offsets topic and a first acknowledgement")
        _compact_offsets_often(cluster.bootstrap)
        started = time.monotonic()
        monkey = ChaosMonkey(cluster, seed, lambda brokers: healed(cluster, brokers), log).start(seconds)
        monkey.join()
        report.seconds = time.monotonic() - started
        report.faults, report.stuck = monkey.faults, monkey.stuck
        log(f"chaos: faults over, healing ({dict(monkey.faults)})")
        wait_until(lambda: healed(cluster, all_brokers), "every ISR full after the chaos", HEAL_S)
        report.unacknowledged_after_flush = producer.stop_and_flush(HEAL_S)
        report.sent, report.acknowledged = producer.sent, len(producer.acked)
        report.delivery_errors, report.fatal_errors = producer.failed, producer.fatal
        wait_until(lambda: caught_up(cluster), "every replica at its leader's log end", HEAL_S)
        verdict = judge_read_back(producer.acked, read_back(cluster.bootstrap, TOPIC, PARTITIONS))
        report.lost, report.misplaced = len(verdict.lost), len(verdict.misplaced)
        report.implicit_acks = verdict.implicit_acks
        report.duplicated, report.in_log_unacknowledged = len(verdict.duplicated), verdict.unacknowledged
        report.examples = {"lost": verdict.lost[:5], "misplaced": verdict.misplaced[:5],
                           "duplicated": verdict.duplicated[:5], "all_duplicated": verdict.duplicated}
        try:
            wait_until(lambda: committed_offsets(cluster.bootstrap, GROUP, TOPIC, PARTITIONS)
                       == verdict.log_end, "the group's commits at the log end", HEAL_S)
        except AssertionError:
            committed = committed_offsets(cluster.bootstrap, GROUP, TOPIC, PARTITIONS)
            report.committed_behind = {p: (committed.get(p), end) for p, end in verdict.log_end.items()
                                       if committed.get(p) != end}  # fmt: skip
        for m in members:
            m.stop()
        seen = set().union(*(m.seen for m in members))
        report.not_consumed = sum(1 for v in producer.acked if v not in seen)
    finally:
        if monkey is not None:
            monkey.stop()
            monkey.resume_all()
        for m in members:
            m.stop()
        cluster.stop()  # SIGTERM: flushes and checkpoints, as the audit reads a stopped cluster
    report.divergence = replica_divergence(root, TOPIC)
    if report.duplicated:
        report.resent_after_epoch_bump = len(resent_under_a_new_epoch(
            root, TOPIC, report.examples["all_duplicated"]))
    report.records_on_disk = _records_on_disk(root)
    output, code, partitions, records, violations = spark_audit(root, root.parent / "audit")
    report.audit, report.audit_output = (code, partitions, records, violations), output
    log(report.summary())
    return report


def _records_on_disk(root: Path) -> int:
    from pipeline.layout import find_replicas
    from protocol.records import iter_batches

    return sum(h.record_count for r in find_replicas(root) for s in r.segments
               for _, h in iter_batches(Path(s.path).read_bytes()))  # fmt: skip
