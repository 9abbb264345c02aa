"""SharePartition on a ManualClock: records acquired under a lock on the timing wheel, released
when it fires (Archived at the delivery count limit), acknowledged all or nothing; the start
offset moves over what is done."""

from __future__ import annotations

import pytest

from broker.share.share_partition import AcknowledgeType, RecordState, SharePartition
from protocol.errors import ErrorCode, KafkaError
from protocol.records import encode_batch
from timer import ManualClock, SystemTimer

ACCEPT, RELEASE, REJECT, GAP = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                AcknowledgeType.REJECT, AcknowledgeType.GAP)


def batch(base: int, count: int, *, control: bool = False) -> bytes:
    return encode_batch([(None, b"%d" % (base + i), (), 0) for i in range(count)],
                        base_offset=base, is_control=control)


class Log:
    """The batches of a partition, read as the log reads them: whole batches from the one
    holding the offset."""

    def __init__(self, *batches: bytes) -> None:
        self.batches = [(int.from_bytes(b[:8], "big"), b) for b in batches]

    def read(self, offset: int) -> bytes:
        return b"".join(b for base, b in self.batches
                        if base + int.from_bytes(b[23:27], "big") >= offset)


def setup(start: int = 0, *, limit: int = 3, max_in_flight: int = 100):
    clock = ManualClock()
    timer = SystemTimer(clock)
    woken: list[int] = []
    share = SharePartition("g", "t", 0, start, add_timer=timer.add, lock_duration_ms=1_000,
                           delivery_count_limit=limit, max_in_flight=max_in_flight,
                           on_available=lambda: woken.append(1))
    return clock, timer, share, woken


def states(share: SharePartition) -> dict[int, tuple[str, int]]:
    return {o: (r.state.name, r.delivery_count) for o, r in share.records()}


def test_acquired_records_come_back_when_their_lock_expires():
    clock, timer, share, woken = setup()
    log = Log(batch(0, 3), batch(3, 2))
    acquired = share.acquire("a", log.read(share.read_from()), 10)
    assert acquired.ranges == [(0, 4, 1)]
    assert acquired.records == log.read(0)
    assert not share.can_acquire(5)  # all of them locked by "a"
    assert share.acquire("b", log.read(share.read_from()), 10).ranges == []
    clock.advance(999)
    timer.advance_clock()
    assert states(share)[0] == ("ACQUIRED", 1)
    clock.advance(1)
    timer.advance_clock()
    assert states(share) == {o: ("AVAILABLE", 1) for o in range(5)}
    assert woken  # a parked share fetch is told
    again = share.acquire("b", log.read(share.read_from()), 10)
    assert again.ranges == [(0, 4, 2)]


def test_the_delivery_count_limit_archives_a_record_and_the_start_offset_moves_over_it():
    clock, timer, share, _ = setup(limit=2)
    log = Log(batch(0, 2))
    for delivery in (1, 2):
        assert share.acquire("a", log.read(share.read_from()), 10).ranges == [(0, 1, delivery)]
        clock.advance(1_000)
        timer.advance_clock()
    assert states(share) == {}  # both archived: nothing in flight
    assert share.start_offset == 2
    assert not share.can_acquire(2)


def test_acknowledgements_accept_release_reject_and_gaps():
    _, _, share, woken = setup()
    log = Log(batch(0, 6))
    share.acquire("a", log.read(0), 10)
    share.acknowledge("a", [(0, 1, [ACCEPT]), (2, 4, [RELEASE, REJECT, GAP]), (5, 5, [ACCEPT])])
    assert states(share) == {2: ("AVAILABLE", 1), 3: ("ARCHIVED", 1), 4: ("ARCHIVED", 1),
                             5: ("ACKNOWLEDGED", 1)}
    assert share.start_offset == 2 and woken == [1]
    assert share.acquire("b", log.read(share.read_from()), 10).ranges == [(2, 2, 2)]
    share.acknowledge("b", [(2, 2, [ACCEPT])])
    assert share.start_offset == 6 and states(share) == {}


def test_an_acknowledgement_is_all_or_nothing():
    _, _, share, _ = setup()
    log = Log(batch(0, 2), batch(2, 2))
    share.acquire("a", log.read(0), 2)
    share.acquire("b", log.read(share.read_from()), 2)
    before = states(share)
    cases = [
        ([(0, 1, [ACCEPT]), (2, 2, [ACCEPT])], ErrorCode.INVALID_RECORD_STATE),  # 2 is b's
        ([(0, 0, [ACCEPT]), (0, 1, [ACCEPT])], ErrorCode.INVALID_REQUEST),  # 0 twice
        ([(0, 1, [ACCEPT, ACCEPT, ACCEPT])], ErrorCode.INVALID_REQUEST),  # types per offset
        ([(1, 0, [ACCEPT])], ErrorCode.INVALID_REQUEST),
        ([(0, 0, [9])], ErrorCode.INVALID_REQUEST),
        ([(0, 2**62, [ACCEPT])], ErrorCode.INVALID_RECORD_STATE),  # no walk over 2^62 offsets
    ]
    for batches, code in cases:
        with pytest.raises(KafkaError) as failed:
            share.acknowledge("a", batches)
        assert failed.value.code == code, batches
    assert states(share) == before


def test_transaction_markers_are_not_delivered_and_new_records_stop_at_a_batch_boundary():
    _, _, share, _ = setup()
    log = Log(batch(0, 2), batch(2, 1, control=True), batch(3, 4))
    first = share.acquire("a", log.read(0), 2)
    assert first.ranges == [(0, 1, 1)]
    # The marker at 2 skipped; 3 records asked, the whole batch of 4 given (MaxRecords may be
    # exceeded to keep to batch boundaries, as Kafka's batch-optimized acquisition)
    second = share.acquire("a", log.read(share.read_from()), 3)
    assert second.ranges == [(3, 6, 1)]
    assert second.records == log.batches[2][1]  # only the batch holding them
    share.acknowledge("a", [(0, 1, [ACCEPT]), (3, 6, [ACCEPT])])
    assert share.start_offset == 7


def test_in_flight_records_are_bounded_and_a_closed_session_releases_its_member():
    _, _, share, _ = setup(max_in_flight=3)
    log = Log(batch(0, 2), batch(2, 2), batch(4, 2))
    assert share.acquire("a", log.read(0), 10).ranges == [(0, 3, 1)]  # a batch at a time
    assert not share.can_acquire(6)
    share.release_member("a")
    assert {s for s, _ in states(share).values()} == {RecordState.AVAILABLE.name}
    assert share.can_acquire(6)


def test_records_deleted_from_the_log_leave_the_share_partition():
    _, _, share, _ = setup()
    log = Log(batch(0, 4))
    share.acquire("a", log.read(0), 10)
    share.move_start(3)
    assert share.start_offset == 3 and sorted(states(share)) == [3]


def test_released_records_are_given_again_with_the_lock_limit_reached():
    """More records in flight than the limit (one big batch, its start held by a released
    record): no new record is taken, but the released ones are, so the share partition never
    stalls (librdkafka's 0172 livelocked on it)."""
    _, _, share, _ = setup(max_in_flight=3)
    log = Log(batch(0, 5), batch(5, 2))
    assert share.acquire("a", log.read(0), 10).ranges == [(0, 4, 1)]  # a whole batch of 5
    share.acknowledge("a", [(0, 4, [RELEASE, ACCEPT, ACCEPT, ACCEPT, ACCEPT])])
    assert len(share.in_flight) == 5 and share.can_acquire(7)
    again = share.acquire("b", log.read(share.read_from()), 10)
    assert again.ranges == [(0, 0, 2)]  # the released one; nothing new past the limit
    assert share.next_offset == 5
    share.acknowledge("b", [(0, 0, [ACCEPT])])  # the start moves: room for new ones
    assert share.acquire("b", log.read(share.read_from()), 10).ranges == [(5, 6, 1)]
