"""DelayedFetch's completion check over many partitions, with a stand-in for the log reads."""

from __future__ import annotations

import asyncio

from broker.replication.delayed_fetch import DelayedFetch, FetchParams, FetchPartition


async def test_a_follower_fetch_stops_checking_at_the_first_partition_with_data():
    checked: list[int] = []
    available = {3: 1}  # of 1,000 partitions, only partition 3 has something new

    def bytes_available(params, fp):
        checked.append(fp.partition)
        return available.get(fp.partition, 0)

    op = DelayedFetch(FetchParams(replica_id=1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20),
                      [FetchPartition("t", p, 0, 1024) for p in range(1000)],
                      bytes_available=bytes_available, read=lambda params, parts: [],
                      future=asyncio.get_running_loop().create_future())
    assert op.try_complete() is True
    assert checked == [0, 1, 2, 3]


async def test_min_bytes_still_adds_up_over_partitions_and_zero_completes_at_once():
    def run(min_bytes: int, available: dict[int, int]) -> bool:
        op = DelayedFetch(
            FetchParams(replica_id=-1, max_wait_ms=500, min_bytes=min_bytes, max_bytes=1 << 20),
            [FetchPartition("t", p, 0, 1024) for p in range(4)],
            bytes_available=lambda params, fp: available.get(fp.partition, 0),
            read=lambda params, parts: [], future=asyncio.get_running_loop().create_future())
        return op.try_complete()

    assert run(100, {0: 60, 2: 30}) is False
    assert run(100, {0: 60, 2: 30, 3: 10}) is True
    assert run(0, {}) is True
    # An error on a later partition (None) still completes it, whatever came before.
    assert run(100, {0: 60, 1: None}) is True
