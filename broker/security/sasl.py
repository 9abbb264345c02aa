"""What the SASL mechanisms share: their names and the failure a server mechanism raises."""

from __future__ import annotations

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
MIN_ITERATIONS = 4096  # Kafka refuses fewer SCRAM iterations (ScramMechanism.minIterations)
MAX_ITERATIONS = 16384  # and more, when credentials are altered (AlterUserScramCredentials)


class SaslAuthenticationFailed(Exception):
    """The client's credentials were wrong (its message goes to the client)."""


class SaslServer:
    """A mechanism's server side, sans-I/O: each client token in, a challenge out, until
    `complete` (then `username` is who logged in)."""

    mechanism = ""
    complete = False
    username = ""

    def evaluate(self, token: bytes) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def user_to_look_up(self, token: bytes) -> str | None:
        """The user whose stored credential `evaluate(token)` will need (SCRAM's client-first
        names it): the caller reads it from the store first, so evaluate stays synchronous."""
        return None
