"""The metadata the brokers write is Kafka's ZooKeeper layout, in Kafka's own JSON, so Kafka's tools
(and people who know them) can read it: broker registrations, the controller and its epoch,
topics, partition states, topic configs, producer-id blocks."""

from __future__ import annotations

import uuid

from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import CREATE_TOPICS

INIT_PRODUCER_ID = 22


async def test_znodes_are_in_kafkas_json(async_broker):
    store, (host, port) = async_broker.store, async_broker.advertised_address()
    client = await RawClient.connect(async_broker.port)
    await client.request(CREATE_TOPICS, 7, {"topics": [
        {"name": "formats", "num_partitions": 2, "replication_factor": 1, "assignments": [],
         "configs": [{"name": "retention.ms", "value": "60000"}]}], "timeout_ms": 10_000})
    await client.request(INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                               "transaction_timeout_ms": -1})
    await client.close()

    registration = (await store.get_json("/brokers/ids/0"))[0]
    assert registration["version"] == 5 and registration["jmx_port"] == -1
    assert registration["endpoints"] == [f"PLAINTEXT://{host}:{port}"]
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert (registration["host"], registration["port"]) == (host, port)
    assert registration["timestamp"].isdigit()

    controller = (await store.get_json("/controller"))[0]
    assert controller["version"] == 1 and controller["brokerid"] == 0
    assert controller["timestamp"].isdigit()
    assert int((await store.get("/controller_epoch"))[0]) >= 1

    topic = (await store.get_json("/brokers/topics/formats"))[0]
    assert topic["version"] == 3 and uuid.UUID(topic["topic_id"])
    assert topic["partitions"] == {"0": [0], "1": [0]}
    assert (topic["adding_replicas"], topic["removing_replicas"]) == ({}, {})
    state = (await store.get_json("/brokers/topics/formats/partitions/0/state"))[0]
    assert set(state) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
    assert (state["version"], state["leader"], state["isr"]) == (1, 0, [0])

    assert (await store.get_json("/config/topics/formats"))[0] == {
        "version": 1, "config": {"retention.ms": "60000"}}
    block = (await store.get_json("/latest_producer_id_block"))[0]
    assert block == {"version": 1, "broker": 0, "block_start": "0", "block_end": "999"}
    assert (await store.get_json("/cluster/id"))[0]["version"] == "1"
