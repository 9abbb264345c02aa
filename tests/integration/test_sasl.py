"""SASL listeners (SASL_PLAINTEXT, SASL_SSL) with PLAIN and SCRAM-SHA-256/512, driven by the three
Python clients over real TCP: they log in, produce and consume; a wrong password is a clean
authentication error on the client; the principal is `User:<name>`."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer

from broker.security.scram import make_credential
from broker.security.scram_credentials import ScramCredentialStore
from tests.integration.security_fixtures import certs, tls_settings

__all__ = ["certs"]  # the fixture
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              'username="admin" password="admin-secret" '
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def sasl_settings(certs) -> dict[str, str]:
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            **tls_settings(certs)}


@pytest.fixture
def sasl_broker(broker_factory, certs):
    broker = broker_factory(sasl_settings(certs))
    store = ScramCredentialStore(broker.cluster.store)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        for user, password in USERS.items():
            broker.call(lambda u=user, p=password, m=mechanism: store.set(u, m, make_credential(m, p)))
    return broker


def address(broker, listener: str) -> str:
    host, port = broker.cluster.brokers[0].addresses[listener]
    return f"{host}:{port}"


def principals(broker) -> list[str]:
    return broker.call(lambda: [c.principal for c in broker.cluster.brokers[0].connections()])


def confluent_conf(broker, certs, listener, mechanism, password="alice-secret") -> dict:
    conf = {"bootstrap.servers": address(broker, listener), "security.protocol": listener,
            "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password}
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(certs["ca.pem"])
    return conf


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_confluent_kafka(sasl_broker, certs, listener, mechanism):
    conf = confluent_conf(sasl_broker, certs, listener, mechanism)
    topic = f"ck-{listener}-{mechanism}".lower()
    producer = Producer(conf)
    producer.produce(topic, b"authenticated")
    assert producer.flush(30) == 0
    assert "User:alice" in principals(sasl_broker)
    consumer = Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    msg = consumer.poll(20)
    assert msg is not None and msg.error() is None and msg.value() == b"authenticated"
    consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_wrong_password(sasl_broker, certs, mechanism):
    errors = []
    producer = Producer({**confluent_conf(sasl_broker, certs, "SASL_PLAINTEXT", mechanism, "wrong"),
                         "error_cb": errors.append})
    for _ in range(40):
        producer.poll(0.25)
        if errors:
            break
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()


def kafka_python_conf(broker, certs, listener, mechanism, password="alice-secret") -> dict:
    conf = {"bootstrap_servers": address(broker, listener), "security_protocol": listener,
            "sasl_mechanism": mechanism, "sasl_plain_username": "alice",
            "sasl_plain_password": password}
    if listener == "SASL_SSL":
        conf["ssl_cafile"] = str(certs["ca.pem"])
    return conf


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kafka_python(sasl_broker, certs, listener, mechanism):
    conf = kafka_python_conf(sasl_broker, certs, listener, mechanism)
    topic = f"kp-{listener}-{mechanism}".lower()
    producer = KafkaProducer(**conf)
    producer.send(topic, b"kafka-python logged in").get(30)
    assert "User:alice" in principals(sasl_broker)
    producer.close()
    consumer = KafkaConsumer(topic, **conf, auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    assert [r.value for r in consumer] == [b"kafka-python logged in"]
    consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_wrong_password(sasl_broker, certs, mechanism, caplog):
    # kafka-python 3 retries a bootstrap whose login failed until its timeout; the login error
    # it met on the way is the broker's answer, logged by the client.
    from kafka.errors import KafkaTimeoutError
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(**kafka_python_conf(sasl_broker, certs, "SASL_PLAINTEXT", mechanism, "wrong"),
                      bootstrap_timeout_ms=2000)
    failures = [r.getMessage() for r in caplog.records
                if "SaslAuthenticationFailedError" in r.getMessage()]
    assert failures and "Authentication failed" in failures[0], failures


def aiokafka_conf(broker, certs, listener, mechanism, password="alice-secret") -> dict:
    conf = {"bootstrap_servers": address(broker, listener), "security_protocol": listener,
            "sasl_mechanism": mechanism, "sasl_plain_username": "alice",
            "sasl_plain_password": password}
    if listener == "SASL_SSL":
        conf["ssl_context"] = create_ssl_context(cafile=str(certs["ca.pem"]))
    return conf


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
async def test_aiokafka(sasl_broker, certs, listener, mechanism):
    conf = aiokafka_conf(sasl_broker, certs, listener, mechanism)
    topic = f"aio-{listener}-{mechanism}".lower()
    producer = AIOKafkaProducer(**conf)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"aiokafka logged in")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, **conf, auto_offset_reset="earliest")
    await consumer.start()
    try:
        assert (await asyncio.wait_for(consumer.getone(), 20)).value == b"aiokafka logged in"
    finally:
        await consumer.stop()


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_aiokafka_wrong_password(sasl_broker, certs, mechanism, caplog):
    # aiokafka reports the bootstrap as a connection error and logs the broker's answer
    from aiokafka.errors import KafkaConnectionError
    producer = AIOKafkaProducer(**aiokafka_conf(sasl_broker, certs, "SASL_PLAINTEXT", mechanism,
                                                "wrong"))
    with pytest.raises(KafkaConnectionError):
        await producer.start()
    await producer.stop()
    failures = [r.getMessage() for r in caplog.records if "[Error 58]" in r.getMessage()]
    assert failures and "Authentication failed" in failures[0], failures


def test_kafka_python_and_confluent_kafka_reauthenticate(broker_factory, certs):
    # KIP-368: with connections.max.reauth.ms both clients log in again on the same connection
    # before their session ends, and keep producing without an error.
    broker = broker_factory({**sasl_settings(certs), "connections.max.reauth.ms": "1000"})
    kp = KafkaProducer(**kafka_python_conf(broker, certs, "SASL_PLAINTEXT", "PLAIN"))
    ck = Producer(confluent_conf(broker, certs, "SASL_PLAINTEXT", "PLAIN"))
    errors: list = []

    def logins() -> list[int]:
        return broker.call(lambda: [c.logins for c in broker.cluster.brokers[0].connections()])

    deadline = time.monotonic() + 30
    while sum(n >= 3 for n in logins()) < 2:  # both clients' connections re-authenticated twice
        assert time.monotonic() < deadline, logins()
        kp.send("reauth", b"kafka-python").get(10)
        ck.produce("reauth", b"confluent", on_delivery=lambda err, msg: err and errors.append(err))
        assert ck.flush(10) == 0
    kp.close()
    assert errors == []
