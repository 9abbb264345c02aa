"""Seeded fault schedules: one seed, one schedule; at most one broker down at a time; a single
broker is never stopped; the kinds asked for only."""

from __future__ import annotations

import pytest

from broker.control.fault_schedule import KINDS, FaultSchedule, ScheduleRunner


def test_a_seed_gives_one_schedule_and_seeds_differ():
    first = FaultSchedule.from_seed(42, brokers=3, duration_s=60)
    assert first == FaultSchedule.from_seed(42, brokers=3, duration_s=60)
    assert first.faults != FaultSchedule.from_seed(43, brokers=3, duration_s=60).faults
    assert len(first.faults) == 30  # 0.5 a second
    assert [f.at_s for f in first.faults] == sorted(f.at_s for f in first.faults)
    assert {f.kind for f in first.faults} <= set(KINDS)
    assert all(0 <= f.broker < 3 and f.at_s <= 60 for f in first.faults)
    assert "seed 42" in first.describe()


def test_at_most_one_broker_is_down_and_a_lone_broker_never():
    for seed in range(50):
        restarts = [f for f in FaultSchedule.from_seed(seed, brokers=3, duration_s=60,
                                                        faults_per_s=2).faults
                    if f.kind == "restart"]
        for before, after in zip(restarts, restarts[1:], strict=False):
            assert before.at_s + before.duration_s <= after.at_s, seed
        alone = FaultSchedule.from_seed(seed, brokers=1, duration_s=60, faults_per_s=2)
        assert "restart" not in {f.kind for f in alone.faults}


def test_only_the_kinds_asked_for():
    schedule = FaultSchedule.from_seed(7, brokers=3, kinds=["delay", "drop"], faults_per_s=2)
    assert {f.kind for f in schedule.faults} == {"delay", "drop"}
    assert all(f.delay_ms for f in schedule.faults if f.kind == "delay")
    with pytest.raises(ValueError, match="fault kinds are among"):
        FaultSchedule.from_seed(7, kinds=["flood"])
    with pytest.raises(ValueError):
        FaultSchedule.from_seed(7, kinds=[])


def test_the_runner_ends_a_fault_before_it_begins_the_next_at_the_same_time():
    schedule = FaultSchedule.from_seed(1, brokers=2, duration_s=10, faults_per_s=3)
    timeline = ScheduleRunner(None, schedule).timeline()  # type: ignore[arg-type]
    assert len(timeline) == 2 * len(schedule.faults)
    assert [t for t, _, _ in timeline] == sorted(t for t, _, _ in timeline)
    begun = set()
    for _, index, begins in timeline:
        if begins:
            begun.add(index)
        else:
            assert index in begun
