"""Log.increment_log_start_offset (DeleteRecords, followers): whole segments below go, reads below
get OFFSET_OUT_OF_RANGE, the leader epoch cache is cut from the start, and it survives a restart."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode, KafkaError
from storage.log import Log
from storage.log_config import LogConfig
from tests.unit.storage.test_storage_log import FakeClock, batch, open_log, read_all


def filled(tmp_path, batches: int = 6) -> Log:
    log = open_log(tmp_path, segment_bytes=200)
    for i in range(batches):
        log.append_as_leader(batch(), leader_epoch=i // 2)
    log.high_watermark = log.log_end_offset
    return log


def test_moves_the_start_deletes_whole_segments_and_refuses_reads_below(tmp_path):
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    assert log.increment_log_start_offset(bases[2] + 0) is True
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.increment_log_start_offset(bases[2]) is False  # never backwards, no-op at the start
    with pytest.raises(KafkaError) as exc:
        log.read(bases[2] - 1, 1 << 20)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert read_all(log) == list(range(bases[2], 6))
    assert log.leader_epoch_cache.epoch_entries()[0][1] >= bases[2]


def test_inside_a_segment_keeps_it_and_above_the_high_watermark_is_refused(tmp_path):
    log = filled(tmp_path)
    log.high_watermark = 4
    first = log.segments[0]
    assert first.next_offset - first.base_offset > 1
    log.increment_log_start_offset(first.base_offset + 1)
    assert log.segments[0] is first and log.log_start_offset == first.base_offset + 1
    with pytest.raises(KafkaError) as exc:
        log.increment_log_start_offset(5)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_up_to_the_log_end_leaves_an_empty_active_segment_and_survives_a_restart(tmp_path):
    log = filled(tmp_path)
    log.increment_log_start_offset(6)
    assert [s.base_offset for s in log.segments] == [6]
    assert log.log_start_offset == log.log_end_offset == 6
    log.close()
    reopened = Log.open(tmp_path / "topic-0", LogConfig(segment_bytes=200), now_ms=FakeClock(),
                        log_start_offset=6, clean_shutdown=True)
    assert reopened.log_start_offset == 6
