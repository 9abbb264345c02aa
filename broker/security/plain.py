"""SASL/PLAIN (RFC 4616), as Kafka's PlainSaslServer: one token `authzid NUL user NUL password`,
checked against the users of the listener's PlainLoginModule."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from broker.security.sasl import PLAIN, SaslAuthenticationFailed, SaslServer


class PlainServer(SaslServer):
    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                           f"{len(parts)}")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(user)
        # compare_digest: the time taken says nothing about how much of the password matched
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an "
                                           "authorization id that is different from username")
        self.username, self.complete = user, True
        return b""


def plain_token(username: str, password: str) -> bytes:
    """The client's token (a broker logging in to another broker)."""
    return b"\0" + username.encode() + b"\0" + password.encode()
