"""partition.metadata on a real broker: written as Kafka writes it when a partition's log is
created, and checked when the broker starts again: a folder holding another topic id (its topic
deleted and recreated under the same name while the broker was down) is not adopted."""

from __future__ import annotations

import asyncio
import base64
import uuid

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from storage.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_fetch_sessions import answered, fetch_body, produce_one
from tests.integration.test_fetch_topic_ids import topic_id
from tests.integration.test_hostile_input import create_topic

FETCH = 1


async def start(data_dir) -> Cluster:
    cluster = Cluster(cluster_config(data_dir), 1)
    await cluster.start()
    broker = cluster.brokers[0]
    await broker.metadata_cache.wait_for(lambda s: s.controller_id == 0, 30_000)
    if "fs" in broker.metadata_cache.topics:  # restarted: its LeaderAndIsr may still be coming
        await until(lambda: ("fs", 0) in broker.replica_manager.partitions)
    return cluster


async def test_written_on_creation_and_a_foreign_folder_not_adopted(tmp_path):
    cluster = await start(tmp_path / "data")
    broker = cluster.brokers[0]
    client = await RawClient.connect(broker.port)
    await create_topic(client, "fs", 1)
    tid = await topic_id(client, "fs")
    await produce_one(client, 0)
    await client.close()
    await asyncio.to_thread(broker.log_manager.flusher.drain)  # the folder's durable batch
    directory = broker.log_manager.get_log("fs", 0).directory
    text = (directory / PARTITION_METADATA_FILE).read_text()
    encoded = base64.urlsafe_b64encode(tid.bytes).decode().rstrip("=")
    assert text == f"version: 0\ntopic_id: {encoded}\n"
    assert read_partition_metadata(directory) == tid
    await cluster.stop()

    # Restarted with its own folder: adopted, the record is there.
    cluster = await start(tmp_path / "data")
    client = await RawClient.connect(cluster.brokers[0].port)
    kept = await client.request(FETCH, 12, fetch_body(0, -1, {0: 0}))
    assert answered(kept)[0][:2] == (ErrorCode.NONE, 1)
    await client.close()
    await cluster.stop()

    # The folder now says it belongs to another topic named "fs": not adopted, an empty log instead.
    foreign = uuid.uuid4()
    (directory / PARTITION_METADATA_FILE).write_text(
        f"version: 0\ntopic_id: {base64.urlsafe_b64encode(foreign.bytes).decode().rstrip('=')}\n")
    cluster = await start(tmp_path / "data")
    broker = cluster.brokers[0]
    client = await RawClient.connect(broker.port)
    fresh = await client.request(FETCH, 12, fetch_body(0, -1, {0: 0}))
    assert answered(fresh)[0][:2] == (ErrorCode.NONE, 0)
    await client.close()
    await asyncio.to_thread(broker.log_manager.flusher.drain)
    assert read_partition_metadata(broker.log_manager.get_log("fs", 0).directory) == tid
    await cluster.stop()
