"""TLS listeners (listeners=SSL://..., PEM key and trust stores, ssl.client.auth) with the three
Python clients over real TCP; mutual TLS names the principal; bad settings are one-line errors at
start-up; a failed or hostile handshake costs only its own connection."""

from __future__ import annotations

import asyncio
import ssl

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer

from broker.config import ConfigError
from broker.server.cluster import Cluster
from tests.harness import cluster_config
from tests.integration.raw_client import RawClient
from tests.integration.security_fixtures import certs, client_ssl_context, tls_settings
from tests.integration.test_hostile_input import served_promptly

__all__ = ["certs"]  # the fixture
METADATA = 3


def ssl_broker(broker_factory, certs, client_auth="required"):
    return broker_factory({"listeners": "SSL://127.0.0.1:0", **tls_settings(certs, client_auth)})


def principals(broker) -> list[str]:
    """What the broker's connections authenticated as (the principal handlers get)."""
    return broker.call(lambda: [c.principal for c in broker.cluster.brokers[0].connections()])


def test_confluent_kafka_over_mutual_tls(broker_factory, certs):
    broker = ssl_broker(broker_factory, certs)
    conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(certs["ca.pem"]),
            "ssl.certificate.location": str(certs["client-cert.pem"]),
            "ssl.key.location": str(certs["client-key.pem"])}
    producer = Producer(conf)
    producer.produce("tls-ck", b"over tls")
    assert producer.flush(30) == 0
    assert "User:CN=client,O=kafka-sim" in principals(broker)
    consumer = Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("tls-ck", 0, 0)])
    msg = consumer.poll(20)
    assert msg is not None and msg.error() is None and msg.value() == b"over tls"
    consumer.close()


def test_kafka_python_over_tls_without_client_certificate(broker_factory, certs):
    broker = ssl_broker(broker_factory, certs, client_auth="none")
    tls = {"security_protocol": "SSL", "ssl_cafile": str(certs["ca.pem"])}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, **tls)
    producer.send("tls-kp", b"hello").get(30)
    producer.close()
    assert set(principals(broker)) <= {"User:ANONYMOUS"}
    consumer = KafkaConsumer("tls-kp", bootstrap_servers=broker.bootstrap, **tls,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    assert [r.value for r in consumer] == [b"hello"]
    consumer.close()


async def test_aiokafka_over_mutual_tls(broker_factory, certs):
    broker = ssl_broker(broker_factory, certs)
    context = create_ssl_context(cafile=str(certs["ca.pem"]), certfile=str(certs["client-cert.pem"]),
                                 keyfile=str(certs["client-key.pem"]))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, security_protocol="SSL",
                                ssl_context=context)
    await producer.start()
    try:
        await producer.send_and_wait("tls-aio", b"async tls")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer("tls-aio", bootstrap_servers=broker.bootstrap,
                                security_protocol="SSL", ssl_context=context,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), 20)
        assert record.value == b"async tls"
    finally:
        await consumer.stop()


@pytest.mark.parametrize("client_auth", ["required", "requested"])
async def test_client_certificate_names_the_principal(tmp_path, certs, client_auth):
    cluster = Cluster(cluster_config(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **tls_settings(certs, client_auth)}), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        port = broker.addresses["SSL"][1]
        client = await RawClient.connect(port, ssl=client_ssl_context(certs))
        response = await client.request(METADATA, 12, {"topics": [],
                                                       "allow_auto_topic_creation": False})
        assert [b.port for b in response.brokers] == [port]  # the SSL listener's endpoint
        assert [c.principal for c in broker.connections()] == ["User:CN=client,O=kafka-sim"]
        await client.close()
        if client_auth == "requested":  # no certificate: served, as ANONYMOUS
            client = await RawClient.connect(port, ssl=client_ssl_context(certs, with_cert=False))
            await client.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
            assert [c.principal for c in broker.connections()] == ["User:ANONYMOUS"]
            await client.close()
        else:  # no certificate: the handshake fails, for that connection only
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                client = await RawClient.connect(port, ssl=client_ssl_context(certs, with_cert=False))
                await client.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        await served_promptly(broker.addresses["PLAINTEXT"][1])
    finally:
        await cluster.stop()


async def test_a_client_without_the_required_certificate_gets_the_tls_alert(tmp_path, certs):
    """ssl.client.auth=required and no client certificate: the handshake fails with the alert
    TLS says ("certificate required"), which a client reports at once (the Java client's
    SslAuthenticationException), not a dropped connection it retries until a timeout."""
    cluster = Cluster(cluster_config(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **tls_settings(certs, "required")}), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        with pytest.raises(ssl.SSLError, match="certificate required"):
            client = await RawClient.connect(broker.addresses["SSL"][1],
                                             ssl=client_ssl_context(certs, with_cert=False))
            await client.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        await served_promptly(broker.addresses["PLAINTEXT"][1])
    finally:
        await cluster.stop()


async def test_garbage_and_plaintext_before_the_handshake(tmp_path, certs):
    cluster = Cluster(cluster_config(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **tls_settings(certs)}), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        port = broker.addresses["SSL"][1]
        for garbage in (b"\x16\x03\x01\xff\xff" + b"\x00" * 200,  # a TLS record claiming 64 KiB
                        b"GET / HTTP/1.1\r\n\r\n",
                        bytes(range(256)) * 4):
            client = await RawClient.connect(port)
            await client.send_raw(garbage)
            assert await asyncio.wait_for(client.is_closed_by_peer(), 5)
            await client.close()
        # a Kafka request in the clear on the TLS port: closed, nothing answered
        client = await RawClient.connect(port)
        await client.send(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert await asyncio.wait_for(client.is_closed_by_peer(), 5)
        await client.close()
        await served_promptly(broker.addresses["PLAINTEXT"][1])
        secure = await RawClient.connect(port, ssl=client_ssl_context(certs))
        await asyncio.wait_for(secure.request(METADATA, 12, {
            "topics": [], "allow_auto_topic_creation": False}), 1.0)
        await secure.close()
    finally:
        await cluster.stop()


@pytest.mark.parametrize(("settings", "message"), [
    ({}, "set ssl.keystore.location"),
    ({"ssl.keystore.location": "/nonexistent/broker.pem"}, "No such file or directory"),
    ({"ssl.keystore.location": "CA"}, "cannot load the key store"),
    ({"ssl.keystore.location": "BROKER", "ssl.client.auth": "required"}, "needs ssl.truststore"),
    ({"ssl.keystore.location": "BROKER", "ssl.truststore.location": "BROKER-KEY-ONLY"},
     "cannot load the trust store"),
    ({"ssl.keystore.location": "BROKER", "ssl.client.auth": "sometimes"}, "none, requested or required"),
    ({"ssl.keystore.location": "BROKER", "ssl.keystore.type": "JKS"}, "PEM only"),
])
async def test_bad_tls_settings_are_one_line_errors_at_start(tmp_path, certs, settings, message):
    paths = {"CA": str(certs["ca.pem"]), "BROKER": str(certs["broker.pem"]),
             "BROKER-KEY-ONLY": str(certs["client-key.pem"])}
    settings = {k: paths.get(v, v) for k, v in settings.items()}
    cluster = Cluster(cluster_config(tmp_path, {"listeners": "SSL://127.0.0.1:0", **settings}), 1)
    with pytest.raises(ConfigError, match=message) as exc:
        await cluster.start()
    assert "\n" not in str(exc.value)
    await cluster.stop()


def test_per_listener_settings(tmp_path, certs):
    config = cluster_config(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SSL",
        "listener.name.clients.ssl.keystore.location": str(certs["broker.pem"]),
        "ssl.client.auth": "none", "listener.name.CLIENTS.ssl.client.auth": "required"})
    assert config.for_listener("CLIENTS", "ssl.keystore.location") == str(certs["broker.pem"])
    assert config.for_listener("PLAINTEXT", "ssl.keystore.location") == ""
    assert config.for_listener("CLIENTS", "ssl.client.auth") == "required"
    with pytest.raises(ConfigError, match="unknown property"):
        cluster_config(tmp_path, {"listener.name.clients.log.dirs": "/tmp"})


async def test_a_stalled_handshake_is_closed_at_the_idle_limit(tmp_path, certs):
    cluster = Cluster(cluster_config(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **tls_settings(certs),
        "connections.max.idle.ms": "1000"}), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        port = broker.addresses["SSL"][1]
        silent = await RawClient.connect(port)  # TCP only: no ClientHello
        assert await asyncio.wait_for(silent.is_closed_by_peer(), 5)  # after 1 s, not 60
        await served_promptly(broker.addresses["PLAINTEXT"][1])
        again = await RawClient.connect(port, ssl=client_ssl_context(certs))
        await asyncio.wait_for(again.request(METADATA, 12, {
            "topics": [], "allow_auto_topic_creation": False}), 1.0)
        await again.close()
    finally:
        await cluster.stop()
