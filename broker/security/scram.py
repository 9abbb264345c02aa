"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka runs it: the salted credential Kafka stores
(salt, stored key, server key, iterations), the server's two-step exchange and the client side a
broker logs in to another broker with."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from broker.security.sasl import (
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslAuthenticationFailed,
    SaslServer,
)

HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """A user's SCRAM credential for one mechanism (RFC 5802's salted keys)."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        """Kafka's ScramCredentialUtils form, kept in /config/users/<user>."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        fields = dict(p.split("=", 1) for p in text.split(","))
        b64 = base64.b64decode
        return cls(b64(fields["salt"]), b64(fields["stored_key"]), b64(fields["server_key"]),
                   int(fields["iterations"]))


def _hmac(name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi() of RFC 5802: PBKDF2 (thousands of rounds: callers on the loop run it in a thread)."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    name = HASHES[mechanism]
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(name, client_key).digest(),
                           _hmac(name, salted, b"Server Key"), iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = salt or os.urandom(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations),
                                  salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslAuthenticationFailed(f"Invalid SCRAM message attribute {part[:20]!r}")
        out[key] = value
    return out


def _sasl_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _username(sasl_name: str) -> str:
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


class ScramServer(SaslServer):
    """Kafka's ScramSaslServer: client-first -> server-first (nonce, salt, iterations);
    client-final (proof) -> server-final (signature)."""

    def __init__(self, mechanism: str,
                 credential_of: Callable[[str, str], ScramCredential | None], *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._nonce_suffix = nonce or secrets.token_urlsafe(24)  # given only by RFC vector tests
        self._hash = HASHES[mechanism]
        self._credential_of = credential_of  # (username, mechanism) -> the stored credential
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = self._server_first = self._nonce = ""
        self._gs2_header = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise SaslAuthenticationFailed("Unexpected SCRAM message after completion")

    def user_to_look_up(self, token: bytes) -> str | None:
        if self._state != "first":
            return None
        with contextlib.suppress(UnicodeDecodeError, SaslAuthenticationFailed, KeyError):
            parts = token.decode().split(",", 2)
            if len(parts) == 3:
                return _username(_attributes(parts[2])["n"])
        return None  # unreadable: evaluate refuses it

    def _first(self, message: str) -> bytes:
        # gs2-header: "n,," or "n,a=authzid," (no channel binding), then the bare message
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] != "n" or (parts[1] and not parts[1].startswith("a=")):
            raise SaslAuthenticationFailed("Invalid SCRAM client first message")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        attrs = _attributes(parts[2])
        if "n" not in attrs or "r" not in attrs:
            raise SaslAuthenticationFailed("Invalid SCRAM client first message")
        username = _username(attrs["n"])
        authzid = _username(parts[1][2:]) if parts[1] else ""
        if authzid and authzid != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an "
                                           "authorization id that is different from username")
        credential = self._credential_of(username, self.mechanism)
        if credential is None:
            raise SaslAuthenticationFailed("Authentication failed: Invalid user credentials")
        self.username, self._credential = username, credential
        self._nonce = attrs["r"] + self._nonce_suffix
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        without_proof, sep, proof = message.rpartition(",p=")
        attrs = _attributes(without_proof) if sep else {}
        if not sep or attrs.get("r") != self._nonce:
            raise SaslAuthenticationFailed("Invalid SCRAM client final message")
        if attrs.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise SaslAuthenticationFailed("Invalid SCRAM client final message: channel binding")
        assert self._credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._hash, self._credential.stored_key, auth_message)
        try:
            client_proof = base64.b64decode(proof, validate=True)
        except ValueError:
            raise SaslAuthenticationFailed("Invalid SCRAM client final message: proof") from None
        if len(client_proof) != len(signature):
            raise SaslAuthenticationFailed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   self._credential.stored_key):
            raise SaslAuthenticationFailed("Invalid client credentials")
        server_signature = _hmac(self._hash, self._credential.server_key, auth_message)
        self._state, self.complete = "done", True
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (a broker logging in to another broker's SASL listener)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism, self.username, self.password = mechanism, username, password
        self._hash = HASHES[mechanism]
        self._nonce = secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_sasl_name(username)},r={self._nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        """The proof (runs PBKDF2: call it in a thread)."""
        text = server_first.decode()
        attrs = _attributes(text)
        if not attrs.get("r", "").startswith(self._nonce):
            raise SaslAuthenticationFailed("SCRAM server nonce does not extend the client's")
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={attrs['r']}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"),
                                       auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check_server_final(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode())
        if base64.b64decode(attrs.get("v", "")) != self._server_signature:
            raise SaslAuthenticationFailed("SCRAM server signature does not match")
