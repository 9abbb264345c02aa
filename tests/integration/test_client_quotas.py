"""DescribeClientQuotas (48) and AlterClientQuotas (49) over the raw protocol: ZooKeeper's node
layout, Kafka's filter semantics (EXACT / DEFAULT / ANY, strict) and its errors entity by entity."""

from __future__ import annotations

import asyncio

import pytest

from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from tests.harness import cluster_config, watches_settled
from tests.integration.raw_client import RawClient
from tests.integration.test_acl_checks import ALL, ALLOW, CLUSTER, DENY, LITERAL, create_acls
from tests.integration.test_hostile_input import served_promptly

DESCRIBE, ALTER = 48, 49


def entity(**parts: str | None) -> list[dict]:
    return [{"entity_type": t.replace("_", "-"), "entity_name": n} for t, n in parts.items()]


def op(key: str, value: float = 0.0, remove: bool = False) -> dict:
    return {"key": key, "value": value, "remove": remove}


async def alter(client: RawClient, entries: list[tuple[list[dict], list[dict]]],
                validate_only: bool = False, version: int = 1) -> list[tuple]:
    response = await client.request(ALTER, version, {
        "entries": [{"entity": e, "ops": ops} for e, ops in entries],
        "validate_only": validate_only})
    return [({x.entity_type: x.entity_name for x in r.entity}, r.error_code, r.error_message)
            for r in response.entries]


async def describe(client: RawClient, components: list[tuple[str, int, str | None]],
                   strict: bool = False, version: int = 1):
    response = await client.request(DESCRIBE, version, {
        "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
        "strict": strict})
    if response.error_code != ErrorCode.NONE:
        return response.error_code, response.error_message
    return {tuple(sorted((x.entity_type, x.entity_name) for x in e.entity)):
            {v.key: v.value for v in e.get("values")} for e in response.entries}


EXACT, DEFAULT, ANY = 0, 1, 2


async def setup_quotas(client: RawClient) -> None:
    results = await alter(client, [
        (entity(user="alice"), [op("producer_byte_rate", 1000)]),
        (entity(user=None), [op("consumer_byte_rate", 2000)]),
        (entity(client_id="app"), [op("request_percentage", 12.5)]),
        (entity(client_id=None), [op("producer_byte_rate", 3000)]),
        (entity(user="alice", client_id="app"), [op("controller_mutation_rate", 7)]),
        (entity(user=None, client_id=None), [op("producer_byte_rate", 4000)]),
        (entity(user="b/ob", client_id="c d"), [op("consumer_byte_rate", 5000)]),
    ])
    assert all(code == ErrorCode.NONE for _, code, _ in results), results


async def test_alter_writes_zookeepers_layout_and_notifies(async_broker):
    client = await RawClient.connect(async_broker.port)
    await setup_quotas(client)
    store = async_broker.store
    assert (await store.get_json("/config/users/alice"))[0] == {
        "version": 1, "config": {"producer_byte_rate": "1000"}}
    assert (await store.get_json("/config/users/<default>"))[0]["config"] == {
        "consumer_byte_rate": "2000"}
    assert (await store.get_json("/config/clients/app"))[0]["config"] == {
        "request_percentage": "12.5"}
    assert (await store.get_json("/config/users/alice/clients/app"))[0]["config"] == {
        "controller_mutation_rate": "7.0"}
    assert (await store.get_json("/config/users/<default>/clients/<default>"))[0]["config"] == {
        "producer_byte_rate": "4000"}
    # Names are sanitized as Kafka's Sanitizer does
    assert (await store.get_json("/config/users/b%2Fob/clients/c%20d"))[0]["config"] == {
        "consumer_byte_rate": "5000"}
    changes = [(await store.get_json(f"/config/changes/{c}"))[0]
               for c in sorted(await store.get_children("/config/changes"))]
    assert {"version": 2, "entity_path": "users/b%2Fob/clients/c%20d"} in changes
    assert {"version": 2, "entity_path": "clients/<default>"} in changes
    # ... and the broker applied them (its watch of the notifications reads them)
    await watches_settled()
    quotas = async_broker.quotas
    assert quotas.produce.quota("alice", "app") == 1000  # user beats <default>/<default>
    assert quotas.produce.quota("zed", "other") == 4000  # <default>/<default>
    assert quotas.fetch.quota("zed", "") == 2000  # <default> user
    assert quotas.request.quota("", "app") == 12.5
    # Removing keys, and validate_only writing nothing
    assert (await alter(client, [(entity(user="alice"), [op("producer_byte_rate", 5)])],
                        validate_only=True))[0][1] == ErrorCode.NONE
    await watches_settled()
    assert quotas.produce.quota("alice", "app") == 1000
    await alter(client, [(entity(user="alice"), [op("producer_byte_rate", remove=True)])])
    await watches_settled()
    assert (await store.get_json("/config/users/alice"))[0]["config"] == {}
    assert quotas.produce.quota("alice", "app") == 4000
    await client.close()


async def test_describe_filters_as_kafka(async_broker):
    client = await RawClient.connect(async_broker.port)
    await setup_quotas(client)
    alice = (("user", "alice"),)
    alice_app = (("client-id", "app"), ("user", "alice"))
    default_user = (("user", None),)
    defaults = (("client-id", None), ("user", None))
    bob = (("client-id", "c d"), ("user", "b/ob"))
    every = await describe(client, [])
    assert set(every) == {alice, default_user, (("client-id", "app"),), (("client-id", None),),
                          alice_app, defaults, bob}
    assert every[alice_app] == {"controller_mutation_rate": 7.0}
    assert await describe(client, [], strict=True) == {}
    # EXACT user: non-strict also gives its (user, client-id) entities; strict only the user
    assert set(await describe(client, [("user", EXACT, "alice")])) == {alice, alice_app}
    assert set(await describe(client, [("user", EXACT, "alice")], strict=True)) == {alice}
    # DEFAULT user, strict: the <default> user alone; ANY user with ANY client-id: pairs only
    assert set(await describe(client, [("user", DEFAULT, None)], strict=True)) == {default_user}
    assert set(await describe(client, [("user", ANY, None), ("client-id", ANY, None)])) == {
        alice_app, defaults, bob}
    assert set(await describe(client, [("user", DEFAULT, None), ("client-id", DEFAULT, None)],
                              strict=True)) == {defaults}
    assert set(await describe(client, [("client-id", EXACT, "app")], strict=True)) == {
        (("client-id", "app"),)}
    assert await describe(client, [("user", EXACT, "nobody")], strict=True) == {}
    # v0 answers the same
    assert set(await describe(client, [("user", EXACT, "alice")], version=0)) == {alice, alice_app}
    await client.close()


async def test_describe_errors(async_broker):
    client = await RawClient.connect(async_broker.port)
    assert await describe(client, [("user", ANY, None), ("user", EXACT, "a")]) == (
        ErrorCode.INVALID_REQUEST, "Duplicate user filter component entity type")
    assert await describe(client, [("", ANY, None)]) == (
        ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
    assert await describe(client, [("group", ANY, None)]) == (
        ErrorCode.UNSUPPORTED_VERSION, "Custom entity type 'group' not supported")
    assert (await describe(client, [("ip", ANY, None), ("user", ANY, None)]))[0] == \
        ErrorCode.INVALID_REQUEST
    assert (await describe(client, [("user", 7, None)]))[0] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert await describe(client, [("ip", ANY, None)]) == {}
    await client.close()


async def test_alter_errors_entity_by_entity(async_broker):
    client = await RawClient.connect(async_broker.port)
    results = await alter(client, [
        (entity(user="ok"), [op("consumer_byte_rate", 10)]),
        ([], [op("producer_byte_rate", 1)]),
        (entity(group="g"), [op("producer_byte_rate", 1)]),
        (entity(user=""), [op("producer_byte_rate", 1)]),
        (entity(client_id="c"), [op("producer_byte_rate", 1.5)]),
        (entity(client_id="d"), [op("producer_byte_rate", 1), op("max.poll", 1)]),
        (entity(user="u"), [op("SCRAM-SHA-256", 1)]),
        (entity(client_id="e"), [op("SCRAM-SHA-256", 1)]),
        (entity(ip="1.2.3.4", user="u"), [op("producer_byte_rate", 1)]),
    ])
    assert results == [
        ({"user": "ok"}, ErrorCode.NONE, None),
        ({}, ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"),
        ({"group": "g"}, ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: group"),
        ({"user": ""}, ErrorCode.INVALID_REQUEST, "Empty user not supported"),
        ({"client-id": "c"}, ErrorCode.INVALID_REQUEST,
         "Configuration producer_byte_rate must be a LONG value"),
        ({"client-id": "d"}, ErrorCode.INVALID_REQUEST, "Invalid configuration key max.poll"),
        ({"user": "u"}, ErrorCode.UNKNOWN_SERVER_ERROR, "Unexpected config type PASSWORD"),
        ({"client-id": "e"}, ErrorCode.INVALID_REQUEST, "Invalid configuration key SCRAM-SHA-256"),
        ({"ip": "1.2.3.4", "user": "u"}, ErrorCode.INVALID_REQUEST,
         "Invalid quota entity combination, IP entity should not be used with user/client ID "
         "entity."),
    ]
    store = async_broker.store
    assert await store.exists("/config/clients/d") is None  # a failed entity writes nothing
    assert (await store.get_json("/config/users/ok"))[0]["config"] == {"consumer_byte_rate": "10"}
    # A byte rate within 1e-6 of a whole number is that number; removing never fails
    assert (await alter(client, [(entity(client_id="f"), [
        op("producer_byte_rate", 99.9999999), op("no.such.key", remove=True)])], version=0))[0][1:] \
        == (ErrorCode.NONE, None)
    assert (await store.get_json("/config/clients/f"))[0]["config"] == {"producer_byte_rate": "100"}
    await client.close()


async def test_quotas_keep_scram_credentials_of_the_same_user(async_broker):
    client = await RawClient.connect(async_broker.port)
    upsert = {"name": "carol", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16,
              "salted_password": b"p" * 32}
    await client.request(51, 0, {"deletions": [], "upsertions": [upsert]})
    await alter(client, [(entity(user="carol"), [op("producer_byte_rate", 100)])])
    config = (await async_broker.store.get_json("/config/users/carol"))[0]["config"]
    assert set(config) == {"SCRAM-SHA-256", "producer_byte_rate"}
    # a user with credentials only is no quota entity
    await alter(client, [(entity(user="carol"), [op("producer_byte_rate", remove=True)])])
    assert await describe(client, [("user", EXACT, "carol")]) == {}
    assert await async_broker.services.scram_credentials.mechanisms("carol") == {
        "SCRAM-SHA-256": 4096}
    await client.close()


def test_kafka_python_protocol_classes_alter_and_describe(kafka_broker):
    """kafka-python 3 has the two messages (its own encoder) but no admin method for them: its
    admin client's connection sends them."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin.client_quotas import (
        AlterClientQuotasRequest,
        DescribeClientQuotasRequest,
    )

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    try:
        entry, described = AlterClientQuotasRequest.EntryData, DescribeClientQuotasRequest
        alter_request = AlterClientQuotasRequest(entries=[entry(
            entity=[entry.EntityData(entity_type="user", entity_name="alice"),
                    entry.EntityData(entity_type="client-id", entity_name=None)],
            ops=[entry.OpData(key="consumer_byte_rate", value=2048.0, remove=False)])],
            validate_only=False)
        answer = admin._manager.run(admin._manager.send, alter_request)
        assert [(e.error_code, [(x.entity_type, x.entity_name) for x in e.entity])
                for e in answer.entries] == [(0, [("client-id", None), ("user", "alice")])]
        describe_request = described(components=[
            described.ComponentData(entity_type="user", match_type=EXACT, match="alice"),
            described.ComponentData(entity_type="client-id", match_type=DEFAULT, match=None)],
            strict=True)
        answer = admin._manager.run(admin._manager.send, describe_request)
        assert answer.error_code == 0
        assert [[(v.key, v.value) for v in e.values] for e in answer.entries] == [
            [("consumer_byte_rate", 2048.0)]]
    finally:
        admin.close()
    server = kafka_broker.cluster.brokers[0]
    kafka_broker.call(watches_settled)  # the broker's watch of the notifications read them
    assert kafka_broker.call(lambda: server.quotas.fetch.quota("alice", "any")) == 2048


async def test_names_no_node_can_have_are_refused_on_their_connection_alone(async_broker):
    """Kafka's Sanitizer keeps dots: "." and ".." would be relative path steps, which ZooKeeper
    refuses (Kafka answers UNKNOWN_SERVER_ERROR); they once closed the connection here."""
    client = await RawClient.connect(async_broker.port)
    results = await alter(client, [(entity(user=".."), [op("producer_byte_rate", 1)]),
                                   (entity(user="ok", client_id="."), [op("producer_byte_rate", 1)]),
                                   (entity(client_id="..."), [op("producer_byte_rate", 1)])])
    assert [(code, message) for _, code, message in results] == [
        (ErrorCode.UNKNOWN_SERVER_ERROR,
         'Invalid path string "/config/users/.." caused by relative paths not allowed'),
        (ErrorCode.UNKNOWN_SERVER_ERROR,
         'Invalid path string "/config/users/ok/clients/." caused by relative paths not allowed'),
        (ErrorCode.NONE, None)]
    assert (await describe(client, [("user", EXACT, ".")], strict=True))[0] == \
        ErrorCode.UNKNOWN_SERVER_ERROR
    await served_promptly(async_broker.port)
    assert set(await describe(client, [])) == {(("client-id", "..."),)}  # still served
    await client.close()


async def test_a_restarted_broker_applies_the_stored_quotas(tmp_path):
    cluster = Cluster(cluster_config(tmp_path), 1)
    await cluster.start()
    client = await RawClient.connect(cluster.brokers[0].port)
    await alter(client, [(entity(user="carl", client_id=None), [op("consumer_byte_rate", 64)])])
    await client.close()
    await cluster.stop()
    cluster = Cluster(cluster_config(tmp_path), 1)
    await cluster.start()
    try:
        assert cluster.brokers[0].quotas.fetch.quota("carl", "any") == 64
        assert cluster.brokers[0].quotas.fetch.quota("dora", "any") != 64
    finally:
        await cluster.stop()


@pytest.mark.broker_config({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                            "allow.everyone.if.no.acl.found": "true"})
async def test_quota_apis_need_the_clusters_config_operations(async_broker):
    describe_configs, alter_configs = 10, 11
    client = await RawClient.connect(async_broker.port)
    await alter(client, [(entity(user="before"), [op("producer_byte_rate", 1)])])
    await create_acls(client, (CLUSTER, "kafka-cluster", LITERAL, ALL, ALLOW),
                      (CLUSTER, "kafka-cluster", LITERAL, alter_configs, DENY))
    assert await alter(client, [(entity(user="u"), [op("producer_byte_rate", 1)])]) == [
        ({"user": "u"}, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)]
    assert set(await describe(client, [])) == {(("user", "before"),)}
    await create_acls(client, (CLUSTER, "kafka-cluster", LITERAL, describe_configs, DENY))
    assert await describe(client, []) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    assert await async_broker.store.exists("/config/users/u") is None
    await client.close()


async def test_thousands_of_entities_in_one_alter_leave_other_clients_served(async_broker):
    client = await RawClient.connect(async_broker.port)
    entries = [{"entity": entity(client_id=f"c{i}"), "ops": [op("producer_byte_rate", 1000)]}
               for i in range(4000)]
    correlation_id = await client.send(ALTER, 1, {"entries": entries, "validate_only": False})
    answer = asyncio.ensure_future(client.receive(ALTER, 1, correlation_id))
    await asyncio.sleep(0)
    await served_promptly(async_broker.port)
    assert not answer.done()  # the other client was served while the entities were written
    response = await asyncio.wait_for(answer, 30)
    assert [e.error_code for e in response.entries] == [ErrorCode.NONE] * 4000
    await watches_settled()
    assert async_broker.quotas.produce.quota("", "c3999") == 1000
    await client.close()
