"""Which error a partition gets from a broker that cannot serve it, as Kafka's ReplicaManager
answers (getPartitionOrError)."""

from __future__ import annotations

from pathlib import Path

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.harness import cluster_config
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topics, manual
from tests.integration.test_protocol_edges import PRODUCE, produce_body


async def test_a_known_partition_hosted_elsewhere_is_not_leader_an_unknown_one_unknown(
        tmp_path: Path):
    """Kafka's getPartitionOrError: a partition this broker does not host but the cluster has is
    NOT_LEADER_OR_FOLLOWER (clients refresh metadata and go to its leader); one nobody has is
    UNKNOWN_TOPIC_OR_PARTITION."""
    cluster = Cluster(cluster_config(tmp_path / "data"), 2)
    await cluster.start()
    try:
        b0 = cluster.brokers[0]
        await b0.metadata_cache.wait_for(lambda s: s.controller_id >= 0, 30_000)
        client = await RawClient.connect(b0.port)
        assert await create_topics(client, [{"name": "there", "assignments": manual((0, [1]))}]) \
            == {"there": (ErrorCode.NONE, None)}
        await b0.metadata_cache.wait_for(lambda s: ("there", 0) in s.partitions, 30_000)
        batch = encode_batch([(b"k", b"v", [], 1_000)])
        response = await client.request(PRODUCE, 9, produce_body({
            ("there", 0): batch, ("there", 1): batch, ("nowhere", 0): batch}))
        errors = {(t.name, p.index): p.error_code for t in response.responses
                  for p in t.partition_responses}
        assert errors == {("there", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER,
                          ("there", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        await client.close()
    finally:
        await cluster.stop()
