"""SCRAM credentials where Kafka keeps them in ZooKeeper: /config/users/<user>, JSON
`{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}`.
Brokers read it at each login, so they need no change notifications to follow it; while the store
cannot be reached, a login is checked against what this broker read last (as Kafka's brokers
keep serving logins from their credential cache through a ZooKeeper outage)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker import security
from broker.logs import get_logger
from broker.metadata.sanitizer import desanitize, sanitize
from broker.metadata.store import (
    ConnectionLossError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from broker.security.sasl import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_SHA_256, SCRAM_SHA_512

if TYPE_CHECKING:
    from broker.security.scram import ScramCredential

log = get_logger("kafka_sim.scram_credentials")
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
    """Read on every login (`await refresh(user)` before the SCRAM exchange looks the user up):
    a changed password counts at once."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._last_read: dict[str, dict] = {}  # user -> its node's config, as read last

    async def _config(self, user: str) -> tuple[dict, int | None]:
        if not acceptable_user(user):  # no node can have that name: no credentials
            return {"version": 1, "config": {}}, None
        try:
            data, stat = await self.store.get_json(user_path(user))
        except NoNodeError:
            return {"version": 1, "config": {}}, None
        return data, stat.version

    async def refresh(self, user: str) -> None:
        """Read the user's credentials for the login under way; an unreachable store leaves
        what was read last."""
        try:
            config = (await self._config(user))[0].get("config", {})
        except (ConnectionLossError, SessionExpiredError) as exc:
            log.warning("SCRAM credentials not re-read; using the last read", user=user,
                        reason=str(exc))
            return
        if config:
            self._last_read[user] = config
        else:
            self._last_read.pop(user, None)

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The credential `refresh(user)` read (the SCRAM exchange's synchronous look-up)."""
        text = self._last_read.get(user, {}).get(mechanism)
        try:
            return security.scram.ScramCredential.from_string(text) if text else None
        except (KeyError, ValueError):
            return None

    async def mechanisms(self, user: str) -> dict[str, int]:
        """Mechanism -> iterations of the user's credentials."""
        config = (await self._config(user))[0].get("config", {})
        out = {}
        for mechanism in SCRAM_MECHANISMS:
            if mechanism in config:
                out[mechanism] = security.scram.ScramCredential.from_string(
                    config[mechanism]).iterations
        return out

    async def users(self) -> list[str]:
        try:
            return sorted(desanitize(name) for name in await self.store.get_children(USERS)
                          if name != "<default>")
        except NoNodeError:
            return []

    async def set(self, user: str, mechanism: str, credential: ScramCredential | None) -> None:
        """Upsert (or, with None, delete) one mechanism's credential of `user`."""
        if not acceptable_user(user):
            raise ValueError(f"user name {user!r} is not allowed")
        data, version = await self._config(user)
        config = dict(data.get("config", {}))
        if credential is None:
            config.pop(mechanism, None)
        else:
            config[mechanism] = credential.to_string()
        data = {**data, "version": 1, "config": config}
        if version is None:
            await self.store.ensure_path(USERS)
            try:
                await self.store.create_json(user_path(user), data)
            except NodeExistsError:
                await self.store.set_json(user_path(user), data)
        else:
            await self.store.set_json(user_path(user), data)

    # -- what `kafka-sim ctl users` shows and changes (the control API) -------------------------

    async def describe(self, user: str | None = None) -> list[dict]:
        """[{"user", "mechanisms": {mechanism: iterations}}]; KeyError for an unknown user."""
        names = [user] if user is not None else await self.users()
        out = [{"user": name, "mechanisms": await self.mechanisms(name)} for name in names]
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
        credential = await asyncio.to_thread(security.scram.make_credential, mechanism, password,
                                             iterations)
        await self.set(user, mechanism, credential)
        return (await self.describe(user))[0]

    async def delete(self, user: str, mechanism: str) -> None:
        if mechanism not in await self.mechanisms(user):
            raise KeyError(f"user {user!r} has no {mechanism} credential")
        await self.set(user, mechanism, None)
