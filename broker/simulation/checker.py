"""The checker: Kafka's guarantees tested against one simulation's history and the logs read back
once the faults healed. Anomalies are named as Jepsen's Kafka analysis names them where it has a
name (lost-write, duplicate, aborted-read, ...)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from broker.simulation.history import History


@dataclass(slots=True, frozen=True)
class Anomaly:
    kind: str
    at_ms: int  # when the history first shows it
    text: str
    partition: str | None = None  # the partition it concerns ("sim-1"), when one


@dataclass(slots=True)
class FinalLog:
    """One partition read back from offset 0 after the run: every data record (aborted ones
    too), and what a read_committed consumer keeps of them."""
    records: dict[int, str] = field(default_factory=dict)  # offset -> value
    committed: dict[int, str] = field(default_factory=dict)


def check(history: History, final: dict[int, FinalLog], unhealed: str, topic: str,
          compacted: dict[int, str] | None = None, compacted_topic: str = "") -> list[Anomaly]:
    """The anomalies of a run; `unhealed` says what was still wrong when the run stopped
    waiting for the cluster to heal ('' when it healed); `compacted`, the compacted topic's
    partition read back (offset -> "key=value")."""
    found: list[Anomaly] = []
    if unhealed:
        end = history.last_ms
        found.append(Anomaly("not-healed", end, f"once the faults ended: {unhealed}"))
    found += _acknowledged_writes(history, final, topic)
    found += _duplicates_and_order(history, final, topic)
    found += _reads(history, final, topic)
    found += _transactions(history, final, topic)
    found += _committed_offsets(history)
    found += _group_commits(history)
    found += _replicas(history)
    found += _compaction(history, compacted or {}, f"{compacted_topic}-0")
    return sorted(found, key=lambda a: (a.at_ms, a.kind, a.text))


def _acknowledged_writes(history: History, final: dict[int, FinalLog], topic: str
                         ) -> list[Anomaly]:
    """Every acknowledged record is in the final log, at the offset its acknowledgement gave."""
    out = []
    for ack in history.of_kind("ack"):
        log = final.get(ack.get("partition"), FinalLog())
        for i, value in enumerate(ack.get("values")):
            offset = ack.get("offset") + i
            there = log.records.get(offset)
            if there == value:
                continue
            where = [o for o, v in log.records.items() if v == value]
            if where:
                out.append(Anomaly("inconsistent-offset", ack.at_ms,
                                   f"{value} acknowledged at {ack.get('partition')}:{offset} "
                                   f"is at offset {where[0]}", f"{topic}-{ack.get('partition')}"))
            else:
                out.append(Anomaly("lost-write", ack.at_ms,
                                   f"{value} acknowledged at {ack.get('partition')}:{offset} is "
                                   f"gone (the offset holds {there!r})",
                                   f"{topic}-{ack.get('partition')}"))
    return out


def _duplicates_and_order(history: History, final: dict[int, FinalLog], topic: str
                          ) -> list[Anomaly]:
    """No record twice in a partition; one producer's records in the order it sent them."""
    out = []
    end = history.last_ms
    # Only acknowledged records have an order to keep: a batch given up on may still arrive
    # after the producer went on under a new producer id, as with a real client.
    acknowledged = {v for ack in history.of_kind("ack") for v in ack.get("values")}
    for partition, log in sorted(final.items()):
        seen: dict[str, int] = {}
        last: dict[str, tuple[int, int]] = {}  # producer -> (number, offset)
        for offset, value in sorted(log.records.items()):
            if value in seen:
                out.append(Anomaly("duplicate", end, f"{value} at {partition}:{seen[value]} "
                                   f"and {partition}:{offset}", f"{topic}-{partition}"))
                continue
            seen[value] = offset
            producer, _, number = value.rpartition("-")
            if value not in acknowledged:
                continue
            if producer in last and int(number) < last[producer][0]:
                out.append(Anomaly("reordered", end, f"{value} at {partition}:{offset} after "
                                   f"{producer}-{last[producer][0]} at {last[producer][1]}",
                                   f"{topic}-{partition}"))
            last[producer] = (int(number), offset)
    return out


def _reads(history: History, final: dict[int, FinalLog], topic: str
           ) -> list[Anomaly]:
    """What a read_committed consumer saw stays: the record is at that offset at the end."""
    out = []
    for read in history.of_kind("read"):
        log = final.get(read.get("partition"), FinalLog())
        offset, value = read.get("offset"), read.get("value")
        if log.committed.get(offset) != value:
            out.append(Anomaly("lost-write", read.at_ms,
                               f"{value} read at {read.get('partition')}:{offset} by "
                               f"{read.get('reader')} is not there at the end "
                               f"({log.committed.get(offset)!r})",
                               f"{topic}-{read.get('partition')}"))
    return out


def _transactions(history: History, final: dict[int, FinalLog], topic: str
                  ) -> list[Anomaly]:
    """read_committed sees all of a committed transaction and nothing of an aborted one."""
    out = []
    read_values = {e.get("value"): e for e in history.of_kind("read")}
    committed_values = {p: set(log.committed.values()) for p, log in final.items()}
    for txn in history.of_kind("txn-commit", "txn-abort"):
        values = [(p, v) for p, vs in txn.get("values") for v in vs]
        present = [(p, v) for p, v in values if v in committed_values.get(p, ())]
        if txn.kind == "txn-abort":
            for p, v in values:
                if v in read_values:
                    out.append(Anomaly("aborted-read", read_values[v].at_ms,
                                       f"{v} of aborted {txn.get('txn')} read at {p}:"
                                       f"{read_values[v].get('offset')}", f"{topic}-{p}"))
                elif (p, v) in present:
                    out.append(Anomaly("aborted-read", txn.at_ms,
                                       f"{v} of aborted {txn.get('txn')} is committed at the "
                                       "end", f"{topic}-{p}"))
        elif not present:
            out.append(Anomaly("lost-write", txn.at_ms,
                               f"committed {txn.get('txn')} is not in the log at the end"))
        elif len(present) < len(values):
            missing = sorted(v for p, v in values if (p, v) not in present)
            out.append(Anomaly("partial-transaction", txn.at_ms,
                               f"committed {txn.get('txn')} lacks {', '.join(missing)}"))
    return out


def _committed_offsets(history: History) -> list[Anomaly]:
    """An OffsetFetch returns at least what an OffsetCommit acknowledged before it was sent."""
    out = []
    acked: dict[int, list[tuple[int, int]]] = defaultdict(list)  # partition -> (at, offset)
    for event in history.events:
        if event.kind == "commit":
            acked[event.get("partition")].append((event.at_ms, event.get("offset")))
        elif event.kind == "committed":
            before = [o for at, o in acked[event.get("partition")] if at <= event.get("asked_ms")]
            if before and event.get("offset") < max(before):
                out.append(Anomaly("committed-offset-backwards", event.at_ms,
                                   f"partition {event.get('partition')}: committed offset "
                                   f"{event.get('offset')} read after {max(before)} was "
                                   "acknowledged"))
    return out


def _group_commits(history: History) -> list[Anomaly]:
    """A consumer group's members commit where they have read to, each partition from where the
    last owner committed: an accepted commit below an earlier one is a fenced member's, taken."""
    out = []
    last: dict[int, tuple[int, str, int]] = {}  # partition -> (offset, member, epoch)
    for event in history.of_kind("group-commit"):
        partition, offset = event.get("partition"), event.get("offset")
        before = last.get(partition)
        if before is not None and offset < before[0]:
            out.append(Anomaly("committed-offset-backwards", event.at_ms,
                               f"partition {partition}: {event.get('member')} (epoch "
                               f"{event.get('epoch')}) committed {offset} after {before[1]} "
                               f"(epoch {before[2]}) committed {before[0]}"))
        last[partition] = (offset, event.get("member"), event.get("epoch"))
    return out


def _replicas(history: History) -> list[Anomaly]:
    """From the sampled replica states: one leader per partition and leader epoch, a leader's
    high watermark never going back, one controller per controller epoch, and no broker
    accepting an older controller epoch than one it has seen."""
    out = []
    leaders: dict[tuple[str, int], int] = {}
    high_watermarks: dict[tuple[int, str, int], int] = {}
    controllers: dict[int, int] = {}
    accepted: dict[int, int] = {}
    for event in history.of_kind("replica", "controller", "broker-start"):
        broker = event.get("broker")
        if event.kind == "broker-start":  # a new process: its own memory starts afresh
            accepted.pop(broker, None)
            for key in [k for k in high_watermarks if k[0] == broker]:
                del high_watermarks[key]
            continue
        if event.kind == "controller":
            epoch = event.get("epoch")
            if event.get("active"):
                other = controllers.setdefault(epoch, broker)
                if other != broker:
                    out.append(Anomaly("two-controllers-one-epoch", event.at_ms,
                                       f"brokers {other} and {broker} both controller in "
                                       f"epoch {epoch}"))
            seen = event.get("accepted")
            if seen < accepted.get(broker, -1):
                out.append(Anomaly("stale-controller-epoch", event.at_ms,
                                   f"broker {broker} went back from controller epoch "
                                   f"{accepted[broker]} to {seen}"))
            accepted[broker] = max(seen, accepted.get(broker, -1))
            continue
        if not event.get("leader"):
            continue
        partition, epoch = event.get("partition"), event.get("epoch")
        other = leaders.setdefault((partition, epoch), broker)
        if other != broker:
            out.append(Anomaly("two-leaders-one-epoch", event.at_ms,
                               f"{partition}: brokers {other} and {broker} both led leader "
                               f"epoch {epoch}", partition))
        key = (broker, partition, epoch)
        hw = event.get("hw")
        if hw < high_watermarks.get(key, -1):
            out.append(Anomaly("high-watermark-backwards", event.at_ms,
                               f"{partition} on leader {broker} (epoch {epoch}): high "
                               f"watermark {high_watermarks[key]} -> {hw}", partition))
        high_watermarks[key] = max(hw, high_watermarks.get(key, -1))
    return out


def _compaction(history: History, compacted: dict[int, str], partition: str) -> list[Anomaly]:
    """A compacted partition keeps every key's latest record: an acknowledged record is at its
    offset unless a later record of its key is in the log (the cleaner removed it), and no
    record is there twice."""
    out = []
    latest: dict[str, int] = {}  # key -> its last offset in the log
    seen: dict[str, int] = {}
    for offset, value in sorted(compacted.items()):
        latest[value.split("=")[0]] = offset
        if value in seen:
            out.append(Anomaly("duplicate", history.last_ms,
                               f"{value} at {partition}:{seen[value]} and :{offset}", partition))
        seen[value] = offset
    for ack in history.of_kind("keyed-ack"):
        for i, value in enumerate(ack.get("values")):
            offset = ack.get("offset") + i
            if compacted.get(offset) == value:
                continue
            if value in seen:
                out.append(Anomaly("inconsistent-offset", ack.at_ms,
                                   f"{value} acknowledged at {partition}:{offset} is at offset "
                                   f"{seen[value]}", partition))
            elif latest.get(value.split("=")[0], -1) <= offset:
                out.append(Anomaly("lost-write", ack.at_ms,
                                   f"{value} acknowledged at {partition}:{offset} is gone, and "
                                   "no later record of its key is in the log", partition))
    return out
