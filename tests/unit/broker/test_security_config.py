"""What the security settings turn into at start-up, and the one-line errors for the ones that
cannot work: SASL listeners' mechanisms and JAAS users, the inter-broker client's login."""

from __future__ import annotations

import pytest

from broker.config import ConfigError, build_config
from broker.metadata.embedded_store import EmbeddedMetadataStore
from broker.security.client_security import ClientSecurity
from broker.security.listener_security import ListenerSecurity

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";')


def config(**overrides: str):
    return build_config({"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                         "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
                         "inter.broker.listener.name": "INTERNAL", **overrides}, environ={})


def test_sasl_listener_settings():
    store = EmbeddedMetadataStore()
    security = ListenerSecurity.from_config(
        config(**{"listener.name.internal.plain.sasl.jaas.config": JAAS,
                  "listener.name.internal.sasl.enabled.mechanisms": "plain,SCRAM-SHA-512",
                  "listener.name.internal.connections.max.reauth.ms": "60000"}), "INTERNAL", store)
    assert security.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert security.plain_users == {"broker": "broker-secret", "alice": "alice-secret"}
    assert security.max_reauth_ms == 60000 and security.ssl_context is None
    plaintext = ListenerSecurity.from_config(config(), "PLAINTEXT", store)
    assert not plaintext.sasl and plaintext.ssl_context is None
    client = ClientSecurity.inter_broker(config(**{"listener.name.internal.plain.sasl.jaas.config": JAAS}))
    assert client is not None and (client.mechanism, client.username, client.password) == (
        "PLAIN", "broker", "broker-secret")
    assert ClientSecurity.inter_broker(config(**{"inter.broker.listener.name": "PLAINTEXT"})) is None


@pytest.mark.parametrize(("overrides", "message"), [
    ({}, "set listener.name.internal.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms has GSSAPI"),
    ({"listener.name.internal.plain.sasl.jaas.config": "user_a=b"}, "expected '<LoginModule>"),
])
def test_bad_sasl_settings(overrides, message):
    with pytest.raises(ConfigError, match=message) as exc:
        ListenerSecurity.from_config(config(**overrides), "INTERNAL",
                                     EmbeddedMetadataStore())
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"listener.name.internal.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'},
     "set username and password"),
    ({"listener.name.internal.plain.sasl.jaas.config": JAAS,
      "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
      "sasl.enabled.mechanisms": "PLAIN"}, "is not enabled on the inter-broker listener"),
])
def test_bad_inter_broker_login(overrides, message):
    with pytest.raises(ConfigError, match=message):
        ClientSecurity.inter_broker(config(**overrides))
