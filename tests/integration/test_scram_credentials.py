"""SCRAM users managed over the wire (DescribeUserScramCredentials 50, AlterUserScramCredentials 51)
with confluent-kafka's admin client, then used to log in; and the errors Kafka gives for bad
alterations, read with the raw client."""

from __future__ import annotations

import contextlib

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient
from tests.integration.test_sasl import PLAIN_JAAS

DESCRIBE, ALTER = 50, 51


def can_log_in(broker, mechanism: str, user: str, password: str) -> bool:
    host, port = broker.cluster.brokers[0].addresses["SASL_PLAINTEXT"]
    errors = []
    producer = Producer({"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": password, "error_cb": errors.append})
    metadata = None
    with contextlib.suppress(KafkaException):  # a failed login: list_topics times out
        metadata = producer.list_topics(timeout=5)
    producer.flush(1)
    if errors and errors[0].code() == KafkaError._AUTHENTICATION:
        return False
    return metadata is not None


def test_confluent_admin_manages_scram_users(broker_factory):
    broker = broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                     b"carol-secret"),
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     b"dave-secret")])
    for future in futures.values():
        future.result(10)
    described = admin.describe_user_scram_credentials().result(10)
    assert {u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos]
            for u, d in described.items()} == {"carol": [(ScramMechanism.SCRAM_SHA_512, 8192)],
                                               "dave": [(ScramMechanism.SCRAM_SHA_256, 4096)]}
    # as Kafka keeps it
    stored = broker.call(lambda: broker.cluster.store.get_json("/config/users/carol"))[0]
    assert stored["version"] == 1 and list(stored["config"]) == ["SCRAM-SHA-512"]
    assert stored["config"]["SCRAM-SHA-512"].endswith(",iterations=8192")
    assert can_log_in(broker, "SCRAM-SHA-512", "carol", "carol-secret")
    assert not can_log_in(broker, "SCRAM-SHA-512", "carol", "wrong")
    assert not can_log_in(broker, "SCRAM-SHA-256", "carol", "carol-secret")  # no such credential
    admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)])["carol"].result(10)
    assert not can_log_in(broker, "SCRAM-SHA-512", "carol", "carol-secret")
    assert set(admin.describe_user_scram_credentials().result(10)) == {"dave"}


async def test_bad_alterations_and_descriptions(async_broker):
    client = await RawClient.connect(async_broker.port)
    upsert = {"name": "erin", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16,
              "salted_password": b"p" * 32}
    answer = await client.request(ALTER, 0, {"deletions": [{"name": "nobody", "mechanism": 1}],
                                             "upsertions": [
        upsert, {**upsert, "name": "few", "iterations": 100},
        {**upsert, "name": "many", "iterations": 20000}, {**upsert, "name": "", "mechanism": 1},
        {**upsert, "name": "odd", "mechanism": 9}, {**upsert, "name": "twice"}, {**upsert, "name": "twice"},
        {**upsert, "name": "a/b c"}, {**upsert, "name": ".."}]})
    assert {r.user: (r.error_code, r.error_message) for r in answer.results} == {
        "nobody": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "erin": (ErrorCode.NONE, None),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "odd": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "a/b c": (ErrorCode.NONE, None),
        "..": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username '..' is not allowed")}
    # sanitized, as Kafka
    assert await async_broker.store.exists("/config/users/a%2Fb%20c") is not None
    answer = await client.request(DESCRIBE, 0, {"users": [{"name": "erin"}, {"name": "few"},
                                                          {"name": "x"}, {"name": "x"}, {"name": ""},
                                                          {"name": ".."}]})
    assert {r.user: (r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in answer.results} == {"erin": (0, [(1, 4096)]),
                                         "few": (ErrorCode.RESOURCE_NOT_FOUND, []),
                                         "x": (ErrorCode.DUPLICATE_RESOURCE, []),
                                         "": (ErrorCode.RESOURCE_NOT_FOUND, []),
                                         "..": (ErrorCode.RESOURCE_NOT_FOUND, [])}
    await client.close()


def test_ctl_users(broker_factory, capsys):
    from broker.control import ctl
    broker = broker_factory({"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS},
                            control=True)
    url = broker.control.url
    assert ctl.main(["--url", url, "users", "set", "frank", "--password", "frank-secret",
                     "--mechanism", "SCRAM-SHA-512", "--iterations", "5000"]) == 0
    assert ctl.main(["--url", url, "users", "set", "frank", "--password", "frank-secret"]) == 0
    capsys.readouterr()
    assert ctl.main(["--url", url, "users", "list"]) == 0
    listed = capsys.readouterr().out
    assert "frank" in listed and "SCRAM-SHA-512 (5000 iterations)" in listed
    assert "SCRAM-SHA-256 (4096 iterations)" in listed
    assert can_log_in(broker, "SCRAM-SHA-512", "frank", "frank-secret")
    assert ctl.main(["--url", url, "users", "set", "frank", "--password", "x",
                     "--iterations", "10"]) == 1
    assert "iterations must be 4096-16384" in capsys.readouterr().err
    assert ctl.main(["--url", url, "users", "delete", "frank", "--mechanism", "SCRAM-SHA-512"]) == 0
    assert ctl.main(["--url", url, "users", "delete", "frank", "--mechanism", "SCRAM-SHA-512"]) == 1
    assert "has no SCRAM-SHA-512 credential" in capsys.readouterr().err
    assert not can_log_in(broker, "SCRAM-SHA-512", "frank", "frank-secret")
    assert can_log_in(broker, "SCRAM-SHA-256", "frank", "frank-secret")


@pytest.mark.broker_config({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
async def test_scram_apis_need_the_cluster_permissions(async_broker):
    # User:ANONYMOUS with no ACLs: DESCRIBE and ALTER on the cluster are denied, as Kafka
    client = await RawClient.connect(async_broker.port)
    answer = await client.request(DESCRIBE, 0, {"users": None})
    assert (answer.error_code, answer.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    answer = await client.request(ALTER, 0, {"deletions": [{"name": "x", "mechanism": 1}],
                                             "upsertions": []})
    assert [(r.user, r.error_code) for r in answer.results] == [
        ("x", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    await client.close()
