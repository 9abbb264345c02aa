"""The chaos verdict: the cluster healed (control API state), a read-back of every partition from
offset 0 over the wire, the group's committed offsets, the replicas' segment files compared batch by
batch, and the Spark audit of the stopped cluster's log directories."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pipeline.layout import find_replicas
from protocol.records import decode_batch, iter_batches
from tests.chaos.workload import Ack
from tests.process_cluster import ProcessCluster

AUDIT_LINE = re.compile(r"^audit: (\d+) partitions, (\d+) records, (\d+) violations$", re.M)


def _partitions(cluster: ProcessCluster, broker_id: int) -> list[dict]:
    answer = cluster.control(broker_id, "/partitions")
    return answer["partitions"] if isinstance(answer, dict) else answer


def partition_states(cluster: ProcessCluster, brokers: set[int]) -> list[dict]:
    """Every partition as ZooKeeper has it, with the replica positions its leader knows."""
    answers = {b: _partitions(cluster, b) for b in sorted(brokers)}
    merged: dict[tuple[str, int], dict] = {}
    for states in answers.values():
        for p in states:
            key = (p["topic"], p["partition"])
            if key not in merged or p["replicas_state"]:
                merged[key] = p
    return list(merged.values())


def healed(cluster: ProcessCluster, brokers: set[int]) -> bool:
    """Every partition has a leader and its whole assignment in the ISR."""
    states = partition_states(cluster, brokers)
    return bool(states) and all(p["leader"] >= 0 and set(p["isr"]) == set(p["replicas"])
                                for p in states)  # fmt: skip


def caught_up(cluster: ProcessCluster) -> bool:
    """Healed, and every leader sees each follower at its log end with the high watermark there."""
    states = partition_states(cluster, set(cluster.ids))
    if not healed(cluster, set(cluster.ids)):
        return False
    for p in states:
        replicas = p["replicas_state"]
        if len(replicas) != len(p["replicas"]):
            return False  # its leader's answer is missing
        leo = replicas[0]["log_end_offset"]
        if replicas[0]["high_watermark"] != leo or any(r["log_end_offset"] != leo for r in replicas):
            return False
    return True


def read_back(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every (offset, value) of every partition, from offset 0 up to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-read-back",
                         "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip
    out: dict[int, list[tuple[int, bytes]]] = {}
    try:
        for p in range(partitions):
            high = _high_watermark(consumer, TopicPartition(topic, p))
            consumer.assign([TopicPartition(topic, p, 0)])
            records: list[tuple[int, bytes]] = []
            while not records or records[-1][0] < high - 1:
                if high == 0:
                    break
                message = consumer.poll(30)
                assert message is not None, f"{topic}-{p}: nothing after offset {records[-1:]}"
                if message.error() is None:
                    records.append((message.offset(), message.value()))
                elif message.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"{topic}-{p}: {message.error()}")
            out[p] = records
    finally:
        consumer.close()
    return out


# OFFSET_NOT_AVAILABLE: a leader elected a moment ago whose high watermark is still below the
# start of its epoch answers it, as Kafka does, until its followers have fetched.
_RETRIABLE = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT,
              KafkaError.OFFSET_NOT_AVAILABLE}


def _high_watermark(consumer: Consumer, tp: TopicPartition, attempts: int = 20) -> int:
    """The partition's high watermark; the cluster elects preferred leaders every few seconds, so
    a leader may move under the question: a retriable answer is asked again (bounded)."""
    for attempt in range(attempts):
        try:
            return consumer.get_watermark_offsets(tp, timeout=30)[1]
        except KafkaException as exc:
            if exc.args[0].code() not in _RETRIABLE or attempt == attempts - 1:
                raise
            time.sleep(0.25)  # another process's state: nothing to await
    raise AssertionError("unreachable")


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as OffsetFetch answers them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})  # fmt: skip
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


@dataclass
class ReadBackVerdict:
    acknowledged: int
    lost: list[bytes] = field(default_factory=list)  # acknowledged, not in the log
    misplaced: list[tuple[bytes, Ack, tuple[int, int]]] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)  # in the log more than once
    unacknowledged: int = 0  # in the log, never acknowledged (the producer gave up on none)
    implicit_acks: int = 0  # acknowledged without an offset: checked for presence only
    log_end: dict[int, int] = field(default_factory=dict)


def judge_read_back(acked: dict[bytes, Ack], log: dict[int, list[tuple[int, bytes]]]) -> ReadBackVerdict:
    verdict = ReadBackVerdict(len(acked))
    where: dict[bytes, tuple[int, int]] = {}
    counts: Counter = Counter()
    for p, records in log.items():
        verdict.log_end[p] = records[-1][0] + 1 if records else 0
        for offset, value in records:
            counts[value] += 1
            where[value] = (p, offset)
    verdict.duplicated = sorted(v for v, n in counts.items() if n > 1)
    verdict.unacknowledged = sum(1 for v in counts if v not in acked)
    for value, ack in acked.items():
        if value not in where:
            verdict.lost.append(value)
        elif counts[value] == 1 and (where[value][0] != ack.partition
                                     or ack.offset is not None and where[value][1] != ack.offset):
            verdict.misplaced.append((value, ack, where[value]))
        if ack.offset is None:
            verdict.implicit_acks += 1
    return verdict


def replica_divergence(root: Path, topic: str) -> list[str]:
    """The stopped cluster's copies of each partition, batch by batch from its segment files: the
    same high watermark everywhere and the same bytes below it."""
    by_partition: dict[int, dict[int, list[tuple[int, bytes]]]] = {}
    watermarks: dict[int, dict[int, int | None]] = {}
    for replica in find_replicas(root):
        if replica.topic != topic:
            continue
        batches = []
        for segment in replica.segments:
            data = Path(segment.path).read_bytes()
            batches += [(h.base_offset, data[pos:pos + h.size])
                        for pos, h in iter_batches(data)]  # fmt: skip
        by_partition.setdefault(replica.partition, {})[replica.replica] = batches
        watermarks.setdefault(replica.partition, {})[replica.replica] = replica.high_watermark
    problems = []
    for p, copies in sorted(by_partition.items()):
        hws = watermarks[p]
        if len(copies) != 3 or len(set(hws.values())) != 1 or None in hws.values():
            problems.append(f"{topic}-{p}: copies {sorted(copies)} with high watermarks {hws}")
            continue
        hw = next(iter(hws.values()))
        below = {b: [(o, raw) for o, raw in batches if o < hw] for b, batches in copies.items()}
        reference_id, reference = next(iter(below.items()))
        for b, batches in below.items():
            if batches != reference:
                first = next((o for (o, x), (_, y) in zip(batches, reference, strict=False) if x != y),
                             min(len(batches), len(reference)))  # fmt: skip
                problems.append(f"{topic}-{p}: broker {b}'s copy differs from broker "
                                f"{reference_id}'s (first at batch {first}, below {hw})")
    return problems


def resent_under_a_new_epoch(root: Path, topic: str, values: list[bytes]) -> list[bytes]:
    """Of records stored twice, those whose copies carry ever higher producer epochs: librdkafka
    bumped its epoch (KIP-360) and re-sent records whose first write it took for failed. The
    broker's own promise, no (producer id, epoch, sequence) twice, is the audit's check."""
    wanted = set(values)
    epochs: dict[bytes, list[int]] = {}
    replicas = [r for r in find_replicas(root) if r.topic == topic]
    first = min(r.replica for r in replicas)  # the copies are compared byte for byte elsewhere
    for replica in replicas:
        if replica.replica != first:
            continue
        for segment in replica.segments:
            data = Path(segment.path).read_bytes()
            for pos, header in iter_batches(data):
                for record in decode_batch(data, pos)[1]:
                    if record.value in wanted:
                        epochs.setdefault(record.value, []).append(header.producer_epoch)
    return sorted(v for v, e in epochs.items()
                  if len(e) > 1 and all(a < b for a, b in zip(e, e[1:], strict=False)))  # fmt: skip


def spark_audit(root: Path, out: Path) -> tuple[str, int, int, int, int]:
    """`kafka-sim pipeline audit` over the log directories: (output, exit code, partitions,
    records, violations)."""
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "audit", "--data-dir", str(root), "--out", str(out),
         "--no-progress"], capture_output=True, text=True, timeout=600, check=False,
        cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    match = AUDIT_LINE.search(result.stdout)
    output = result.stdout + result.stderr
    if match is None:
        return output, result.returncode, -1, -1, -1
    return output, result.returncode, *(int(g) for g in match.groups())
