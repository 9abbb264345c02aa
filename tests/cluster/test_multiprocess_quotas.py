"""Client quotas in a multi-process cluster on a real ZooKeeper: a quota altered through one broker
process is written in ZooKeeper's layout and applied by the others through /config/changes."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.raw_client import RawClient
from tests.integration.test_client_quotas import alter, describe, entity, op
from tests.integration.test_protocol_edges import METADATA
from tests.integration.test_quota_throttling import METADATA_BODY
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow


def throttle_of_a_metadata(port: int) -> int:
    """A new connection's Metadata to that broker process: the throttle time it is answered."""

    async def ask() -> int:
        client = await RawClient.connect(port)
        try:
            return (await client.request(METADATA, 12, METADATA_BODY)).throttle_time_ms
        finally:
            await client.close()

    return asyncio.run(ask())


def through(port: int, coro_fn):
    async def run():
        client = await RawClient.connect(port)
        try:
            return await coro_fn(client)
        finally:
            await client.close()

    return asyncio.run(run())


def test_a_quota_set_through_one_process_applies_on_another(zk_connect, tmp_path):
    cluster = ProcessCluster(zk_connect, tmp_path, brokers=2)
    cluster.start()
    try:
        first, second = cluster.ports[0], cluster.ports[1]
        assert throttle_of_a_metadata(second) == 0
        results = through(first, lambda c: alter(c, [(entity(client_id="raw-test"), [
            op("request_percentage", 1e-9)])]))
        assert [code for _, code, _ in results] == [0]
        # broker 1 follows the notification: any request time is over 1e-9 %, capped at 1 s
        wait_until(lambda: throttle_of_a_metadata(second) == 1000,
                   "broker 1 to throttle by the quota set through broker 0")
        # every entity node, read from ZooKeeper in batches
        assert through(second, lambda c: describe(c, [])) == {
            (("client-id", "raw-test"),): {"request_percentage": 1e-9}}
        wait_until(lambda: throttle_of_a_metadata(first) == 1000, "broker 0 to throttle too")
        through(second, lambda c: alter(c, [(entity(client_id="raw-test"), [
            op("request_percentage", remove=True)])]))
        wait_until(lambda: throttle_of_a_metadata(first) == 0,
                   "broker 0 to drop the quota removed through broker 1")
    finally:
        cluster.stop()
