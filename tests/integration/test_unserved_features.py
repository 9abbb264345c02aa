"""APIs a ZooKeeper-mode Kafka 3.9 broker advertises for features it has switched off, answered as
it answers them: delegation tokens (no token secret), over PLAINTEXT and an authenticated SASL
connection. (KIP-848 consumer groups, switched off there too, are served here: see
test_consumer_group_protocol.py.)"""

from __future__ import annotations

from protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import served_promptly
from tests.integration.test_sasl_hostile import login
from tests.integration.test_sasl_hostile import sasl_broker as sasl_broker  # noqa: F401

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41


async def token_errors(client: RawClient) -> list[int]:
    created = await client.request(CREATE, 3, {
        "owner_principal_type": None, "owner_principal_name": None, "renewers": [],
        "max_lifetime_ms": -1})
    renewed = await client.request(RENEW, 2, {"hmac": b"x", "renew_period_ms": 1})
    expired = await client.request(EXPIRE, 2, {"hmac": b"x", "expiry_time_period_ms": 1})
    described = await client.request(DESCRIBE, 3, {"owners": None})
    assert (created.principal_type, created.principal_name, created.token_id) == (
        "User", created.token_requester_principal_name, "")
    assert renewed.expiry_timestamp_ms == expired.expiry_timestamp_ms == -1
    assert list(described.tokens) == []
    return [created.error_code, renewed.error_code, expired.error_code, described.error_code]


async def test_delegation_tokens_refused_as_kafka_refuses_them(sasl_broker):  # noqa: F811
    plain = await RawClient.connect(sasl_broker.addresses["PLAINTEXT"][1])
    assert await token_errors(plain) == [ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED] * 4
    await plain.close()
    client, answer = await login(sasl_broker.addresses["SASL_PLAINTEXT"][1])
    assert answer.error_code == ErrorCode.NONE
    assert await token_errors(client) == [ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED] * 4
    # An owner named explicitly is echoed; a renewer that is not a User is refused first.
    created = await client.request(CREATE, 3, {
        "owner_principal_type": "User", "owner_principal_name": "bob",
        "renewers": [{"principal_type": "Group", "principal_name": "ops"}], "max_lifetime_ms": -1})
    assert (created.error_code, created.principal_name, created.token_requester_principal_name) == (
        ErrorCode.INVALID_PRINCIPAL_TYPE, "bob", "alice")
    await client.close()
    await served_promptly(sasl_broker.addresses["PLAINTEXT"][1])
