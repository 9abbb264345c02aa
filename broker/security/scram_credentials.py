"""SCRAM credentials where Kafka keeps them in ZooKeeper: /config/users/<user>, JSON
`{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}`.
Brokers read it at each login, so they need no change notifications to follow it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.metadata.sanitizer import desanitize, sanitize
from broker.metadata.store import MetadataStore, NodeExistsError, NoNodeError
from broker.security.sasl import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_SHA_256, SCRAM_SHA_512

if TYPE_CHECKING:
    # SCRAM's arithmetic (hashlib, hmac, secrets) loads with the first credential read or made
    from broker.security.scram import ScramCredential

USERS = "/config/users"
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)


def user_path(user: str) -> str:
    """The user's node: its name sanitized as Kafka's Sanitizer does (URL-encoded, so `/` and
    any other character is safe in a path)."""
    return f"{USERS}/{sanitize(user)}"


def acceptable_user(user: str) -> bool:
    """Not empty, and not a name that sanitizes to a path step ZooKeeper refuses."""
    return bool(user) and user not in (".", "..")


class ScramCredentialStore:
    """Read on every login (no cache to go stale: a changed password counts at once)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def _config(self, user: str) -> tuple[dict, int | None]:
        if not acceptable_user(user):  # no node can have that name: no credentials
            return {"version": 1, "config": {}}, None
        try:
            data, stat = self.store.get_json(user_path(user))
        except NoNodeError:
            return {"version": 1, "config": {}}, None
        return data, stat.version

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        from broker.security.scram import ScramCredential

        text = self._config(user)[0].get("config", {}).get(mechanism)
        try:
            return ScramCredential.from_string(text) if text else None
        except (KeyError, ValueError):
            return None

    def mechanisms(self, user: str) -> dict[str, int]:
        """Mechanism -> iterations of the user's credentials."""
        from broker.security.scram import ScramCredential

        config = self._config(user)[0].get("config", {})
        out = {}
        for mechanism in SCRAM_MECHANISMS:
            if mechanism in config:
                out[mechanism] = ScramCredential.from_string(config[mechanism]).iterations
        return out

    def users(self) -> list[str]:
        try:
            return sorted(desanitize(name) for name in self.store.get_children(USERS)
                          if name != "<default>")
        except NoNodeError:
            return []

    def set(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        """Upsert (or, with None, delete) one mechanism's credential of `user`."""
        if not acceptable_user(user):
            raise ValueError(f"user name {user!r} is not allowed")
        data, version = self._config(user)
        config = dict(data.get("config", {}))
        if credential is None:
            config.pop(mechanism, None)
        else:
            config[mechanism] = credential.to_string()
        data = {**data, "version": 1, "config": config}
        if version is None:
            self.store.ensure_path(USERS)
            try:
                self.store.create_json(user_path(user), data)
            except NodeExistsError:
                self.store.set_json(user_path(user), data)
        else:
            self.store.set_json(user_path(user), data)

    # -- what `kafka-sim ctl users` shows and changes (the control API) -------------------------

    def describe(self, user: str | None = None) -> list[dict]:
        """[{"user", "mechanisms": {mechanism: iterations}}]; KeyError for an unknown user."""
        names = [user] if user is not None else self.users()
        out = [{"user": name, "mechanisms": self.mechanisms(name)} for name in names]
        out = [u for u in out if u["mechanisms"]]
        if user is not None and not out:
            raise KeyError(f"no SCRAM credentials for user {user!r}")
        return out

    async def set_password(self, user: str, mechanism: str, password: str,
                           iterations: int = MIN_ITERATIONS) -> dict:
        """Upsert from a password (PBKDF2 in a thread); ValueError for what Kafka refuses."""
        if not acceptable_user(user):
            raise ValueError(f"user name {user!r} is not allowed")
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"mechanism {mechanism!r} is not one of {', '.join(SCRAM_MECHANISMS)}")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")
        if not password:
            raise ValueError("the password must not be empty")
        from broker.security.scram import make_credential

        credential = await asyncio.to_thread(make_credential, mechanism, password, iterations)
        self.set(user, mechanism, credential)
        return self.describe(user)[0]

    def delete(self, user: str, mechanism: str) -> None:
        if mechanism not in self.mechanisms(user):
            raise KeyError(f"user {user!r} has no {mechanism} credential")
        self.set(user, mechanism, None)
