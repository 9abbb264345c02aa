"""Reads left in the segment file (FileRegion, for sendfile): the same batches a copying read
returns, whatever the limits; small reads copied; a region outliving its segment's descriptor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.api import encode_response, encode_response_parts
from protocol.file_region import FileRegion
from protocol.records import encode_batch
from storage.log import Log
from storage.log_config import LogConfig
from storage.segment import MIN_REGION_BYTES

FETCH_KEY = 1


def log_of(path: Path, batches: int, value_bytes: int, **config) -> Log:
    log = Log.open(path / "topic-0", LogConfig(**config), now_ms=lambda: 1_000)
    for n in range(batches):
        log.append_as_leader(encode_batch([(None, bytes([n % 256]) * value_bytes, [], 1_000)] * 3),
                             leader_epoch=0)
    return log


def region_bytes(records: bytes | FileRegion) -> bytes:
    assert isinstance(records, FileRegion)
    try:
        return records.read()
    finally:
        records.close()


@pytest.mark.parametrize(("offset", "max_bytes", "max_offset"), [
    (0, 1 << 20, None),  # everything
    (0, 100_000, None),  # the limit falls inside a batch: whole batches below it
    (7, 200_000, 40),  # from the middle of a batch, capped by a high watermark
    (30, 1 << 20, None),  # the tail
    (0, 1 << 20, 3),  # one batch: the high watermark right after it
])
def test_a_region_holds_the_batches_a_copying_read_returns(tmp_path, offset, max_bytes,
                                                           max_offset) -> None:
    log = log_of(tmp_path, 20, 4_000, index_interval_bytes=20_000)  # batches ~12 KB
    copied = log.read(offset, max_bytes, max_offset=max_offset).records
    assert len(copied) >= MIN_REGION_BYTES or max_offset == 3
    region = log.read(offset, max_bytes, max_offset=max_offset, as_region=True).records
    if len(copied) < MIN_REGION_BYTES:
        assert region == copied  # few bytes are copied: a descriptor would cost more
    else:
        assert region_bytes(region) == copied


def test_the_first_batch_above_the_limit_comes_as_a_region_of_itself(tmp_path) -> None:
    log = log_of(tmp_path, 2, 20_000)  # batches ~60 KB
    copied = log.read(0, 1_000).records
    assert region_bytes(log.read(0, 1_000, as_region=True).records) == copied
    assert log.read(0, 1_000, as_region=True, min_one_message=False).records == b""


def test_a_region_reads_its_bytes_after_the_log_is_closed_and_deleted(tmp_path) -> None:
    log = log_of(tmp_path, 4, 20_000)
    copied = log.read(0, 1 << 20).records
    region = log.read(0, 1 << 20, as_region=True).records
    log.close()
    for file in (tmp_path / "topic-0").iterdir():
        file.unlink()
    assert region_bytes(region) == copied


def test_a_fetch_response_is_cut_around_its_regions(tmp_path) -> None:
    log = log_of(tmp_path, 4, 20_000)
    copied = log.read(0, 1 << 20).records
    region = log.read(0, 1 << 20, as_region=True).records

    def response(records) -> dict:
        return {"responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "high_watermark": 12, "records": records}]}]}

    parts = encode_response_parts(FETCH_KEY, 12, response(region))
    assert [type(p) for p in parts] == [bytes, FileRegion, bytes]
    assert parts[0] + region_bytes(parts[1]) + parts[2] == encode_response(
        FETCH_KEY, 12, response(copied))
    # An encoder that wants bytes reads the region
    region = log.read(0, 1 << 20, as_region=True).records
    assert encode_response(FETCH_KEY, 12, response(region)) == encode_response(
        FETCH_KEY, 12, response(copied))
    region.close()


def test_no_descriptor_left_means_a_copy(tmp_path) -> None:
    import resource

    log = log_of(tmp_path, 4, 20_000)
    copied = log.read(0, 1 << 20).records
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        with pytest.raises(OSError):
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        assert log.read(0, 1 << 20, as_region=True).records == copied
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
