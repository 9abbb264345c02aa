"""The embedded controller hands partition states to brokers (LeaderAndIsr, UpdateMetadata) only
once the metadata store's journal holds them on disk: a crash of the whole process can never
bring back a leader epoch older than one a broker acted on."""

from __future__ import annotations

import asyncio
import os
import threading

from broker.metadata import zk_paths as paths
from tests.harness import until
from tests.integration.raw_client import RawClient

CREATE_TOPICS = 19


async def test_new_partitions_reach_the_broker_only_after_the_journal_fsync(async_broker,
                                                                            monkeypatch):
    broker, store = async_broker, async_broker.store
    released = threading.Event()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:  # the journal's disk is slow; every other fsync is not
        if threading.current_thread().name == "metadata-journal":
            released.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    client = await RawClient.connect(broker.port)
    try:
        answer = asyncio.create_task(client.request(CREATE_TOPICS, 7, {"topics": [{
            "name": "durable", "num_partitions": 3, "replication_factor": 1, "assignments": [],
            "configs": []}], "timeout_ms": 30_000, "validate_only": False}))
        states = [paths.partition_state("durable", p) for p in range(3)]

        async def written() -> bool:
            return None not in await store.get_many(states)

        await until(written)
        for _ in range(200):  # the controller is free to go on: it must be waiting for the disk
            await asyncio.sleep(0)
        assert not [k for k in broker.replica_manager.partitions if k[0] == "durable"]
        assert not answer.done()  # nor is the client told before its leader knows
        released.set()
        assert (await answer).topics[0].error_code == 0
        await until(lambda: len([k for k in broker.replica_manager.partitions
                                 if k[0] == "durable"]) == 3)
    finally:
        released.set()
        await client.close()
