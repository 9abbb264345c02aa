"""File naming rules for segments and partition folders."""

from __future__ import annotations

from pathlib import Path

from storage.naming import (
    log_dir_name,
    log_file,
    offset_index_file,
    parse_log_dir_name,
    parse_segment_file,
    time_index_file,
)


def test_segment_names() -> None:
    d = Path("/data/t-0")
    assert log_file(d, 42).name == "00000000000000000042.log"
    assert offset_index_file(d, 0).name == "00000000000000000000.index"
    assert time_index_file(d, 7).name == "00000000000000000007.timeindex"
    assert parse_segment_file("00000000000000000042.timeindex") == (42, ".timeindex")
    assert parse_segment_file("42.log") is None
    assert parse_segment_file("00000000000000000042.log.tmp") is None


def test_partition_folder_names() -> None:
    assert log_dir_name("my-topic", 3) == "my-topic-3"
    assert parse_log_dir_name("my-topic-3") == ("my-topic", 3)
    assert parse_log_dir_name("__consumer_offsets-49") == ("__consumer_offsets", 49)
    for bad in ("topic", "-3", "topic-x", "topic-"):
        assert parse_log_dir_name(bad) is None
