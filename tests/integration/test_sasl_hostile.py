"""Hostile input on a SASL listener, sent to a real listener: each costs only its own connection,
and another connection is served within a second. Also SASL's v0 handshake (raw tokens) and
re-authentication (KIP-368) as the protocol has them."""

from __future__ import annotations

import asyncio
import struct

import pytest

from broker.security.plain import plain_token
from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import served_promptly
from tests.integration.test_sasl import PLAIN_JAAS
from timer import ManualClock

METADATA, SASL_HANDSHAKE, API_VERSIONS, CREATE_TOPICS, SASL_AUTHENTICATE = 3, 17, 18, 19, 36
NO_TOPICS = {"topics": [], "allow_auto_topic_creation": False}


@pytest.fixture
async def sasl_broker(tmp_path):
    cluster = Cluster(cluster_config(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "300",
        "connections.max.reauth.ms": "400"}), 1, clock=ManualClock(1_000_000))
    await cluster.start()
    yield cluster.brokers[0]
    await cluster.stop()


async def login(port: int, password: str = "alice-secret", version: int = 2) -> tuple[RawClient, object]:
    client = await RawClient.connect(port)
    handshake = await client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert handshake.error_code == ErrorCode.NONE
    answer = await client.request(SASL_AUTHENTICATE, version,
                                  {"auth_bytes": plain_token("alice", password)})
    return client, answer


async def after_failure_delay(broker, awaitable):
    """Await something a failed login answers: it waits on the broker's timer (the manual clock)
    for connection.failed.authentication.delay.ms, which the test moves on."""
    timer, parked = broker.context.timer, broker.context.timer.size
    task = asyncio.ensure_future(awaitable)
    await until(lambda: timer.size > parked or task.done())
    broker.clock.advance(300)
    return await asyncio.wait_for(task, 5)


async def secured_served(broker) -> None:
    """The PLAINTEXT listener answers within a second, and so does a fresh SASL login."""
    await served_promptly(broker.addresses["PLAINTEXT"][1])
    client, answer = await asyncio.wait_for(login(broker.addresses["SASL_PLAINTEXT"][1]), 1.0)
    assert answer.error_code == ErrorCode.NONE
    await client.close()


async def test_authenticate_before_handshake_is_illegal(sasl_broker):
    client = await RawClient.connect(sasl_broker.addresses["SASL_PLAINTEXT"][1])
    answer = await client.request(SASL_AUTHENTICATE, 1, {"auth_bytes": plain_token("alice", "x")})
    assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert await asyncio.wait_for(client.is_closed_by_peer(), 5)
    await secured_served(sasl_broker)


async def test_requests_before_authentication_close_the_connection(sasl_broker):
    port = sasl_broker.addresses["SASL_PLAINTEXT"][1]
    client = await RawClient.connect(port)  # ApiVersions is allowed first, as Kafka
    versions = await client.request(API_VERSIONS, 3, {"client_software_name": "raw",
                                                      "client_software_version": "1"})
    assert {17, 36} <= {k.api_key for k in versions.api_keys}
    await client.send(METADATA, 12, NO_TOPICS)  # not before logging in
    assert await asyncio.wait_for(client.is_closed_by_peer(), 5)
    client = await RawClient.connect(port)  # after the handshake, only SaslAuthenticate
    await client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    answer = await after_failure_delay(sasl_broker, client.request(
        CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1,
                                       "configs": []}]}))  # as Kafka: its error response
    assert [t.error_code for t in answer.topics] == [ErrorCode.ILLEGAL_SASL_STATE]
    assert await asyncio.wait_for(client.is_closed_by_peer(), 5)
    assert "t" not in sasl_broker.metadata_cache.snapshot.topics
    await secured_served(sasl_broker)


async def test_unsupported_mechanism(sasl_broker):
    client = await RawClient.connect(sasl_broker.addresses["SASL_PLAINTEXT"][1])
    answer = await after_failure_delay(
        sasl_broker, client.request(SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"}))
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert await asyncio.wait_for(client.is_closed_by_peer(), 5)
    await secured_served(sasl_broker)


async def test_a_failed_login_is_answered_late_without_holding_up_others(sasl_broker):
    port = sasl_broker.addresses["SASL_PLAINTEXT"][1]
    timer = sasl_broker.context.timer
    parked = timer.size
    failing = asyncio.ensure_future(login(port, "wrong"))
    await until(lambda: timer.size > parked)  # the answer waits on the broker's timer
    await secured_served(sasl_broker)  # while the failed login waits for its answer
    assert not failing.done()
    sasl_broker.clock.advance(299)
    await secured_served(sasl_broker)
    assert not failing.done()
    sasl_broker.clock.advance(1)  # connection.failed.authentication.delay.ms
    client, answer = await asyncio.wait_for(failing, 5)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert await asyncio.wait_for(client.is_closed_by_peer(), 5)


@pytest.mark.parametrize("size", [524_289, 2**31 - 1])
async def test_huge_frames_before_authentication_are_refused(sasl_broker, size):
    # sasl.server.max.receive.size (512 KiB): the length alone closes the connection
    client = await RawClient.connect(sasl_broker.addresses["SASL_PLAINTEXT"][1])
    await client.send_raw(struct.pack(">i", size) + b"\0" * 1024)
    assert await asyncio.wait_for(client.is_closed_by_peer(), 5)
    # and a token just under the limit is only a failed login
    client = await RawClient.connect(sasl_broker.addresses["SASL_PLAINTEXT"][1])
    await client.request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
    answer = await after_failure_delay(sasl_broker, client.request(
        SASL_AUTHENTICATE, 1, {"auth_bytes": b"n,,n=" + b"a" * 500_000}))
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    await secured_served(sasl_broker)


async def test_v0_handshake_then_raw_tokens(sasl_broker):
    port = sasl_broker.addresses["SASL_PLAINTEXT"][1]
    client = await RawClient.connect(port)
    assert (await client.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})).error_code == 0
    token = plain_token("alice", "alice-secret")
    await client.send_raw(struct.pack(">i", len(token)) + token)  # no Kafka header
    assert await client.read_frame() == b""  # PLAIN's empty challenge, length-prefixed
    response = await client.request(METADATA, 12, NO_TOPICS)
    assert [b.port for b in response.brokers] == [port]
    await client.close()
    client = await RawClient.connect(port)  # a wrong password: closed, no answer (v0 has none)
    await client.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
    token = plain_token("alice", "wrong")
    await client.send_raw(struct.pack(">i", len(token)) + token)
    assert await after_failure_delay(sasl_broker, client.is_closed_by_peer())


async def test_reauthentication(sasl_broker):
    port = sasl_broker.addresses["SASL_PLAINTEXT"][1]
    client, answer = await login(port)
    assert answer.session_lifetime_ms == 400  # connections.max.reauth.ms
    assert (await client.request(METADATA, 12, NO_TOPICS)).brokers
    # KIP-368: a new handshake and login on the same connection, the same principal
    assert (await client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})).error_code == 0
    answer = await client.request(SASL_AUTHENTICATE, 2, {"auth_bytes": plain_token("alice", "alice-secret")})
    assert (answer.error_code, answer.session_lifetime_ms) == (0, 400)
    assert (await client.request(METADATA, 12, NO_TOPICS)).brokers
    # another user may not take the connection over
    await client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    answer = await after_failure_delay(sasl_broker, client.request(
        SASL_AUTHENTICATE, 2, {"auth_bytes": plain_token("admin", "admin-secret")}))
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals" in answer.error_message
    # a session that expired without re-authentication: the next request closes the connection
    client, _ = await login(port)
    sasl_broker.clock.advance(400)
    assert (await client.request(METADATA, 12, NO_TOPICS)).brokers  # the session's last moment
    sasl_broker.clock.advance(1)
    await client.send(METADATA, 12, NO_TOPICS)
    assert await asyncio.wait_for(client.is_closed_by_peer(), 5)
    await secured_served(sasl_broker)


async def test_sasl_apis_after_authentication_or_without_sasl_are_illegal(sasl_broker):
    client = await RawClient.connect(sasl_broker.addresses["PLAINTEXT"][1])
    answer = await client.request(SASL_AUTHENTICATE, 1, {"auth_bytes": b""})
    assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert (await client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})).error_code == \
        ErrorCode.ILLEGAL_SASL_STATE
    await client.close()
