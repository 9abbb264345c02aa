"""The SASL mechanisms on their own: SCRAM-SHA-256 against RFC 7677's example exchange, SCRAM-SHA-512
and PLAIN client against server, every failure a SaslAuthenticationFailed; the stored credential
in Kafka's form; JAAS config values as Kafka writes them."""

from __future__ import annotations

import base64

import pytest

from broker.config import ConfigError
from broker.security.jaas import parse_jaas_config
from broker.security.plain import PlainServer, plain_token
from broker.security.principal import distinguished_name, ssl_principal
from broker.security.sasl import SaslAuthenticationFailed
from broker.security.scram import ScramClient, ScramCredential, ScramServer, make_credential

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def test_scram_sha_256_matches_rfc_7677():
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, RFC7677_SALT)
    server = ScramServer("SCRAM-SHA-256", lambda user, mechanism: credential if user == "user" else None,
                         nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_and_server(mechanism):
    credential = make_credential(mechanism, "alice-secret")
    assert ScramCredential.from_string(credential.to_string()) == credential
    assert credential.to_string().startswith("salt=") and credential.to_string().endswith(",iterations=4096")
    for password, ok in (("alice-secret", True), ("wrong", False)):
        server = ScramServer(mechanism, lambda user, m: credential if user == "alice" else None)
        client = ScramClient(mechanism, "alice", password)
        challenge = server.evaluate(client.first_message())
        final = client.final_message(challenge)
        if ok:
            client.check_server_final(server.evaluate(final))
            assert server.complete
        else:
            with pytest.raises(SaslAuthenticationFailed, match="Invalid client credentials"):
                server.evaluate(final)
            assert not server.complete


@pytest.mark.parametrize("token", [b"", b"garbage", b"n,,n=nobody,r=abc", b"p,,n=alice,r=x",
                                   b"n,a=bob,n=alice,r=x", b"\xff\xfe"])
def test_scram_bad_first_messages(token):
    credential = make_credential("SCRAM-SHA-256", "x")
    server = ScramServer("SCRAM-SHA-256", lambda user, m: credential if user == "alice" else None)
    with pytest.raises(SaslAuthenticationFailed):
        server.evaluate(token)


def test_plain():
    users = {"alice": "alice-secret"}
    server = PlainServer(users)
    assert server.evaluate(plain_token("alice", "alice-secret")) == b"" and server.complete
    assert server.username == "alice"
    for token, message in ((plain_token("alice", "nope"), "Invalid username or password"),
                           (plain_token("mallory", "x"), "Invalid username or password"),
                           (b"bob\0alice\0alice-secret", "authorization id"),
                           (b"alice\0alice-secret", "expected 3 tokens"),
                           (plain_token("", "x"), "username not specified")):
        with pytest.raises(SaslAuthenticationFailed, match=message):
            PlainServer(users).evaluate(token)


def test_jaas_config():
    jaas = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="a \\"quoted\\" one";')
    assert jaas.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert jaas.options["username"] == "admin"
    assert jaas.plain_users == {"admin": "admin-secret", "alice": 'a "quoted" one'}
    with pytest.raises(ConfigError):
        parse_jaas_config("username=admin")


def test_certificate_subject_as_kafka_prints_it():
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
               (("organizationalUnitName", "eng"),), (("commonName", "alice"),))
    assert distinguished_name(subject) == "CN=alice,OU=eng,O=Acme\\, Inc.,C=US"
    assert ssl_principal({"subject": subject}) == "User:CN=alice,OU=eng,O=Acme\\, Inc.,C=US"
    assert ssl_principal({}) == ssl_principal(None) == "User:ANONYMOUS"
