"""The event loop never waits on fsync: segment rolls, periodic flushes, leader-epoch checkpoints,
producer snapshots and a truncation's folder sync all run in the LogManager's flusher thread; a
broker's stop (index files, checkpoints, marker) and start (loading, recovery) do their file work in
worker threads too."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import encode_batch
from storage.index import Index
from storage.naming import CLEAN_SHUTDOWN_FILE
from tests.harness import cluster_config, led_here, until
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import (
    PRODUCE,
    create_topic,
    partition_errors,
    served_promptly,
)
from tests.integration.test_protocol_edges import produce_body


@pytest.mark.broker_config({"log.flush.interval.ms": "20"})
async def test_rolls_and_flushes_never_fsync_on_the_event_loop(async_broker, monkeypatch):
    loop_thread = threading.get_ident()
    fsync_threads: list[int] = []
    fsync = os.fsync

    def recording_fsync(fd: int) -> None:  # observes the real fsync, which still runs
        fsync_threads.append(threading.get_ident())
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)

    lags: list[float] = []
    probing = True

    async def probe() -> None:  # how late a 1 ms sleep wakes up: the loop's longest stall
        while probing:
            started = time.monotonic()
            await asyncio.sleep(0.001)
            lags.append(time.monotonic() - started - 0.001)

    probe_task = asyncio.ensure_future(probe())
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "rolling", 2, {"segment.bytes": "4096"})
    fsync_threads.clear()  # the metadata store's own writes are not this test's business
    batch = encode_batch([(b"k", b"v" * 1000, [], int(time.time() * 1000))])
    for _ in range(200):  # about four batches per segment: some fifty rolls per partition
        response = await client.request(PRODUCE, 9, produce_body(
            {("rolling", 0): batch, ("rolling", 1): batch}))
        assert set(partition_errors(response).values()) == {ErrorCode.NONE}
    log = async_broker.log_manager.get_log("rolling", 0)
    assert len(log.segments) >= 40
    # A follower-style truncation and a full one: their folder syncs go to the flusher too.
    log.truncate_to(100)
    async_broker.log_manager.get_log("rolling", 1).truncate_fully_and_start_at(300)
    await served_promptly(async_broker.port)
    # The next periodic flush (log.flush.interval.ms) after the truncation moves the recovery
    # point once the flusher ran it (a loaded machine may take a while to get there)
    await until(lambda: log.recovery_point == log.log_end_offset)
    await asyncio.to_thread(async_broker.log_manager.flusher.drain)
    probing = False
    await probe_task
    await client.close()

    # Every roll's segment, index and folder fsyncs, the snapshots and the checkpoints happened...
    assert len(fsync_threads) > 4 * 2 * 40
    # ...none of them on the loop's thread.
    assert loop_thread not in fsync_threads
    # Everything below the last roll before the truncation is durable: the recovery point moved.
    assert log.recovery_point == log.log_end_offset == 100
    print(f"fsyncs: {len(fsync_threads)}, longest loop stall: {max(lags) * 1000:.1f} ms")
    assert max(lags) < 1.0


async def test_a_broker_stop_and_start_do_their_file_work_off_the_event_loop(tmp_path, monkeypatch):
    cluster = Cluster(cluster_config(tmp_path / "data"), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
        client = await RawClient.connect(broker.port)
        await create_topic(client, "many", 8, {"segment.bytes": "1100"})
        batch = encode_batch([(b"k", b"v" * 1000, [], int(time.time() * 1000))])
        for _ in range(3):  # one batch per segment: rolls, and active segments without indexes
            response = await client.request(PRODUCE, 9, produce_body(
                {("many", p): batch for p in range(8)}))
            assert set(partition_errors(response).values()) == {ErrorCode.NONE}
        await client.close()

        loop_thread = threading.get_ident()
        calls: list[tuple[str, int]] = []  # (what, thread) of the real calls, which still run
        fsync, replace, write_appended = os.fsync, os.replace, Index.write_appended

        def recording_fsync(fd: int) -> None:
            calls.append(("fsync", threading.get_ident()))
            fsync(fd)

        def recording_replace(*args, **kwargs) -> None:
            calls.append(("rename", threading.get_ident()))
            replace(*args, **kwargs)

        def recording_write_appended(index: Index) -> bool:
            calls.append(("index write", threading.get_ident()))
            return write_appended(index)

        monkeypatch.setattr(os, "fsync", recording_fsync)
        monkeypatch.setattr(os, "replace", recording_replace)
        monkeypatch.setattr(Index, "write_appended", recording_write_appended)
        await cluster.stop_broker(0)
        data_dir = broker.config.data_dir
        assert (data_dir / CLEAN_SHUTDOWN_FILE).exists()
        stopping = list(calls)
        # The active segments' index files, every fsync, the checkpoints' renames: none on the loop.
        assert {what for what, _ in stopping} == {"fsync", "rename", "index write"}
        assert loop_thread not in {thread for _, thread in stopping}

        calls.clear()
        (data_dir / CLEAN_SHUTDOWN_FILE).unlink()  # as after a crash: every log is recovered
        await cluster.start_broker(0)
        broker = cluster.brokers[0]
        await led_here(broker, "many", 7)
        await asyncio.to_thread(broker.log_manager.flusher.drain)
        assert {"fsync", "index write"} <= {what for what, _ in calls}
        assert loop_thread not in {thread for _, thread in calls}
        monkeypatch.undo()
        await served_promptly(broker.port)
        log = broker.log_manager.get_log("many", 7)
        assert log.log_end_offset == 3 and log.recovery_point == 3
    finally:
        await cluster.stop()
