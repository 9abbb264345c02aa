"""The principal a login gives is what the authorizer decides on: with ACLs on, a SASL user, a
SCRAM user and a client certificate's subject each get exactly what their ACLs allow, through
confluent-kafka over SASL_SSL and mutual TLS."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from broker.security.scram import make_credential
from broker.security.scram_credentials import ScramCredentialStore
from tests.integration.security_fixtures import certs, tls_settings
from tests.integration.test_sasl import PLAIN_JAAS, address

__all__ = ["certs"]  # the fixture


def produce_error(conf: dict, topic: str) -> int | None:
    """The delivery error code of one record (None: delivered)."""
    reports = []
    producer = Producer({**conf, "message.timeout.ms": 10_000})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(30)
    assert reports, "no delivery report"
    return None if reports[0] is None else reports[0].code()


def test_acls_decide_on_the_login_principal(broker_factory, certs):
    broker = broker_factory({
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        **tls_settings(certs, "required"),
        "listener.name.sasl_ssl.ssl.client.auth": "none",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin", "auto.create.topics.enable": "false"})
    store = ScramCredentialStore(broker.cluster.store)
    broker.call(lambda: store.set("bob", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "bob-secret")))
    sasl = {"bootstrap.servers": address(broker, "SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs["ca.pem"])}
    admin_conf = {**sasl, "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                  "sasl.password": "admin-secret"}
    alice = {**sasl, "sasl.mechanism": "PLAIN", "sasl.username": "alice",
             "sasl.password": "alice-secret"}
    bob = {**sasl, "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob",
           "sasl.password": "bob-secret"}
    client_cert = {"bootstrap.servers": address(broker, "SSL"), "security.protocol": "SSL",
                   "ssl.ca.location": str(certs["ca.pem"]),
                   "ssl.certificate.location": str(certs["client-cert.pem"]),
                   "ssl.key.location": str(certs["client-key.pem"])}
    admin = AdminClient(admin_conf)  # a super user: allowed everything
    admin.create_topics([NewTopic("ledger", 1, 1)])["ledger"].result(20)
    bindings = [AclBinding(ResourceType.TOPIC, "ledger", ResourcePatternType.LITERAL, principal,
                           "*", AclOperation.WRITE, AclPermissionType.ALLOW)
                for principal in ("User:alice", "User:CN=client,O=kafka-sim")]
    for future in admin.create_acls(bindings).values():
        future.result(20)
    assert produce_error(alice, "ledger") is None
    assert produce_error(client_cert, "ledger") is None  # the certificate's subject
    assert produce_error(bob, "ledger") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # SCRAM users: ALTER (DESCRIBE) on the cluster, as Kafka; the super user has them
    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret")
    alice_admin = AdminClient(alice)
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        alice_admin.alter_user_scram_credentials([upsert])["carol"].result(20)
    admin.alter_user_scram_credentials([upsert])["carol"].result(20)
    assert set(admin.describe_user_scram_credentials().result(20)) == {"bob", "carol"}
