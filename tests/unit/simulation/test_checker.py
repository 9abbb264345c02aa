"""The checker over hand-written histories: each anomaly it names is found, and a history that
keeps Kafka's guarantees has none (so a clean simulation run means something)."""

from __future__ import annotations

import pytest

from broker.simulation.checker import FinalLog, check
from broker.simulation.fault_plan import KINDS, parse_kinds, plan_faults
from broker.simulation.history import History


class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        self.ms += 10
        return self.ms


def history() -> History:
    return History(Clock())


def kinds(h: History, final: dict[int, FinalLog], unhealed: str = "") -> list[str]:
    return [a.kind for a in check(h, final, unhealed, "sim")]


def log(records: dict[int, str], committed: dict[int, str] | None = None) -> FinalLog:
    return FinalLog(dict(records), dict(records if committed is None else committed))


def test_a_history_that_keeps_the_guarantees_has_no_anomaly():
    h = history()
    h.record("ack", producer="idem-0", partition=0, offset=0, values=("idem-0-0", "idem-0-1"))
    h.record("unknown", producer="idem-0", partition=0, values=("idem-0-2",))
    h.record("ack", producer="idem-0", partition=0, offset=3, values=("idem-0-3",))
    h.record("read", reader="reader-0", partition=0, offset=0, value="idem-0-0")
    h.record("txn-commit", producer="txn-0", txn="txn-0.1", values=((0, ("txn-0.1-0-0",)),))
    h.record("txn-abort", producer="txn-0", txn="txn-0.2", values=((0, ("txn-0.2-0-0",)),))
    h.record("commit", partition=0, offset=2)
    h.record("committed", partition=0, offset=2, asked_ms=h.events[-1].at_ms)
    h.record("replica", broker=0, partition="sim-0", leader=True, epoch=0, hw=5, leo=5, isr=(0,))
    h.record("controller", broker=0, active=True, epoch=1, accepted=1)
    records = {0: "idem-0-0", 1: "idem-0-1", 2: "idem-0-2", 3: "idem-0-3", 4: "txn-0.1-0-0",
               5: "txn-0.2-0-0"}
    committed = {o: v for o, v in records.items() if v != "txn-0.2-0-0"}
    assert kinds(h, {0: log(records, committed)}) == []


def test_a_lost_and_a_moved_acknowledged_write():
    h = history()
    h.record("ack", producer="idem-0", partition=0, offset=0, values=("idem-0-0", "idem-0-1"))
    found = check(h, {0: log({0: "idem-0-1"})}, "", "sim")
    assert [a.kind for a in found] == ["inconsistent-offset", "lost-write"]
    assert found[1].partition == "sim-0" and "idem-0-1" in found[0].text


def test_duplicates_and_reordering():
    h = history()
    h.record("ack", producer="idem-0", partition=0, offset=0, values=("idem-0-0",))
    h.record("ack", producer="idem-0", partition=0, offset=1, values=("idem-0-1",))
    got = kinds(h, {0: log({0: "idem-0-1", 1: "idem-0-0", 2: "idem-0-1"})})
    assert "duplicate" in got and "reordered" in got


def test_a_record_read_then_gone():
    h = history()
    h.record("read", reader="reader-0", partition=0, offset=7, value="idem-0-7")
    assert kinds(h, {0: log({})}) == ["lost-write"]


def test_aborted_reads_and_partial_or_lost_transactions():
    h = history()
    h.record("txn-abort", producer="t", txn="t.1", values=((0, ("t.1-0-0",)),))
    h.record("read", reader="reader-0", partition=0, offset=0, value="t.1-0-0")
    h.record("txn-commit", producer="t", txn="t.2", values=((0, ("t.2-0-0",)), (1, ("t.2-1-0",))))
    h.record("txn-commit", producer="t", txn="t.3", values=((1, ("t.3-1-0",)),))
    final = {0: log({0: "t.1-0-0", 1: "t.2-0-0"}, {1: "t.2-0-0"}), 1: log({})}
    # the aborted record read is also a read that did not stay
    assert sorted(kinds(h, final)) == ["aborted-read", "lost-write", "lost-write",
                                       "partial-transaction"]


def test_committed_offsets_going_backwards():
    h = history()
    h.record("commit", partition=0, offset=10)
    asked = h.events[-1].at_ms + 1
    h.record("committed", partition=0, offset=4, asked_ms=asked)
    assert kinds(h, {}) == ["committed-offset-backwards"]


def test_two_leaders_in_one_epoch_and_a_high_watermark_going_back():
    h = history()
    h.record("replica", broker=0, partition="sim-0", leader=True, epoch=3, hw=9, leo=9, isr=(0,))
    h.record("replica", broker=0, partition="sim-0", leader=True, epoch=3, hw=8, leo=9, isr=(0,))
    h.record("replica", broker=1, partition="sim-0", leader=True, epoch=3, hw=8, leo=8, isr=(1,))
    assert kinds(h, {}) == ["high-watermark-backwards", "two-leaders-one-epoch"]


def test_a_restarted_broker_starts_its_high_watermarks_afresh():
    h = history()
    h.record("replica", broker=0, partition="sim-0", leader=True, epoch=3, hw=9, leo=9, isr=(0,))
    h.record("broker-start", broker=0)
    h.record("replica", broker=0, partition="sim-0", leader=True, epoch=3, hw=2, leo=9, isr=(0,))
    assert kinds(h, {}) == []


def test_two_controllers_in_one_epoch_and_a_stale_controller_epoch():
    h = history()
    h.record("controller", broker=0, active=True, epoch=2, accepted=2)
    h.record("controller", broker=1, active=True, epoch=2, accepted=2)
    h.record("controller", broker=2, active=False, epoch=-1, accepted=2)
    h.record("controller", broker=2, active=False, epoch=-1, accepted=1)
    assert kinds(h, {}) == ["two-controllers-one-epoch", "stale-controller-epoch"]


def test_a_cluster_that_never_heals_is_an_anomaly():
    h = history()
    h.record("end", healed=False)
    assert kinds(h, {}, unhealed="sim-0 has ISR [0] of [0, 1, 2]") == ["not-healed"]


def test_the_digest_names_the_history():
    a, b = history(), history()
    for h in (a, b):
        h.record("ack", producer="p", partition=0, offset=0, values=("v",))
    assert a.digest() == b.digest()
    b.record("read", reader="r", partition=0, offset=0, value="v")
    assert a.digest() != b.digest()


def test_one_seed_one_fault_plan():
    first = plan_faults(7, [0, 1, 2], 120_000)
    assert first == plan_faults(7, [0, 1, 2], 120_000)
    assert first != plan_faults(8, [0, 1, 2], 120_000)
    assert len(first) == 23 and all(3_000 <= f.at_ms < 120_000 for f in first)  # 12 a minute
    assert {f.kind for f in plan_faults(7, [0, 1, 2], 600_000, ("crash",))} == {"crash"}
    assert plan_faults(7, [0, 1, 2], 60_000, ()) == []


def test_fault_kinds_parse_or_name_the_unknown_one():
    assert parse_kinds("all") == KINDS and parse_kinds("none") == ()
    assert parse_kinds("default") == tuple(k for k in KINDS if k != "power-loss")
    assert parse_kinds("drop,crash") == ("crash", "drop")
    with pytest.raises(ValueError, match="unknown fault kind flood"):
        parse_kinds("crash,flood")


def test_a_compacted_partition_keeps_each_keys_latest_record():
    h = history()
    h.record("keyed-ack", producer="keyed-0", partition=0, offset=0,
             values=("k1=keyed-0-0", "k1=keyed-0-1", "k2=keyed-0-2"))

    def found(compacted: dict[int, str]) -> list[str]:
        return [a.kind for a in check(h, {}, "", "sim", compacted, "sim-compacted")]

    assert found({1: "k1=keyed-0-1", 2: "k2=keyed-0-2"}) == []  # offset 0 compacted away
    assert found({0: "k1=keyed-0-0", 1: "k1=keyed-0-1", 2: "k2=keyed-0-2"}) == []  # not yet
    assert found({2: "k2=keyed-0-2"}) == ["lost-write", "lost-write"]  # k1's latest is gone
    assert found({1: "k1=keyed-0-1", 3: "k2=keyed-0-2"}) == ["inconsistent-offset"]
    assert found({1: "k1=keyed-0-1", 2: "k2=keyed-0-2", 3: "k2=keyed-0-2"}) == ["duplicate"]


def test_a_group_member_committing_below_the_last_owner():
    h = history()
    h.record("group-commit", member="member-0", epoch=3, partition=1, offset=40)
    h.record("group-commit", member="member-1", epoch=5, partition=1, offset=55)
    h.record("group-commit", member="member-1", epoch=5, partition=2, offset=7)
    assert kinds(h, {}) == []
    h.record("group-commit", member="member-0", epoch=3, partition=1, offset=41)  # a zombie
    found = check(h, {}, "", "sim")
    assert [a.kind for a in found] == ["committed-offset-backwards"]
    assert "member-0 (epoch 3) committed 41 after member-1 (epoch 5) committed 55" in found[0].text
