"""Several named listeners, as Kafka has them: a broker listens on each, answers Metadata with the
endpoints of the listener the request came in on (advertised where set), registers every endpoint
in the metadata store, and refuses listener settings Kafka would refuse, in one line each."""

from __future__ import annotations

import pytest

from broker.config import ConfigError, build_config
from broker.server.cluster import Cluster
from tests.harness import cluster_config
from tests.integration.raw_client import RawClient

METADATA = 3
TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    "advertised.listeners": "PLAINTEXT://outside.example:19092",
    "inter.broker.listener.name": "INTERNAL",
}


async def test_metadata_answers_with_the_endpoints_of_the_listener_asked(tmp_path):
    cluster = Cluster(cluster_config(tmp_path, TWO_LISTENERS), 2)
    await cluster.start()
    try:
        for b in cluster.brokers.values():
            await b.metadata_cache.wait_for(lambda s: len(s.brokers) == 2, 10_000)
        broker = cluster.brokers[0]
        internal = {b.broker_id: b.addresses["INTERNAL"] for b in cluster.brokers.values()}
        for listener, expected in (
            ("PLAINTEXT", {0: ("outside.example", 19092), 1: ("outside.example", 19092)}),
            ("INTERNAL", internal),
        ):
            client = await RawClient.connect(broker.addresses[listener][1])
            response = await client.request(METADATA, 12, {"topics": [],
                                                           "allow_auto_topic_creation": False})
            await client.close()
            assert {b.node_id: (b.host, b.port) for b in response.brokers} == expected
        registration = (await cluster.store.get_json("/brokers/ids/1"))[0]
        assert registration["endpoints"] == [
            "PLAINTEXT://outside.example:19092",
            f"INTERNAL://127.0.0.1:{internal[1][1]}"]
        assert (registration["host"], registration["port"]) == internal[1]  # inter-broker
    finally:
        await cluster.stop()


@pytest.mark.parametrize(("overrides", "message"), [
    ({"listeners": "PLAINTEXT://:0,INTERNAL://:0"}, "INTERNAL has no security protocol"),
    ({"listeners": "TLS://:0", "listener.security.protocol.map": "TLS:TLS"},
     "unknown security protocol TLS"),
    ({"listeners": "PLAINTEXT://:0,PLAINTEXT://:1"}, "appears twice"),
    ({"advertised.listeners": "OUTSIDE://x:1"}, "which listeners does not have"),
    ({"inter.broker.listener.name": "REPLICATION"}, "is not one of the listeners"),
])
def test_listener_settings_kafka_refuses(overrides, message):
    with pytest.raises(ConfigError, match=message):
        build_config(overrides, environ={})
