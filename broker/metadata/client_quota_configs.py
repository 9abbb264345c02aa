"""Client quota configs where ZooKeeper-mode Kafka keeps them: /config/users/<user>,
/config/clients/<client-id> and /config/users/<user>/clients/<client-id>, names sanitized (a null
name is the `<default>` entity), JSON {"version":1,"config":{...}}, each change announced under
/config/changes as `users/...` or `clients/...` (Kafka's AdminZkClient.changeConfigs)."""

from __future__ import annotations

import json

from broker.metadata import zk_paths as paths
from broker.metadata.sanitizer import desanitize, sanitize
from broker.metadata.store import MetadataStore, NodeExistsError, NoNodeError

DEFAULT = "<default>"  # Kafka's ConfigEntityName.Default
USERS, CLIENTS = "users", "clients"

# (sanitized user or None, sanitized client id or None): which node an entity's config is in
EntityKey = tuple[str | None, str | None]


def sanitize_entity_name(name: str | None) -> str:
    """A null name is the default entity."""
    return DEFAULT if name is None else sanitize(name)


def desanitize_entity_name(name: str) -> str | None:
    return None if name == DEFAULT else desanitize(name)


def entity_path(key: EntityKey) -> str:
    """The notification's entity path ("users/u", "clients/c", "users/u/clients/c")."""
    user, client = key
    if user is not None:
        return f"{USERS}/{user}" + (f"/{CLIENTS}/{client}" if client is not None else "")
    if client is None:
        raise ValueError("an entity has a user, a client id or both")
    return f"{CLIENTS}/{client}"


class InvalidEntityPath(ValueError):
    """A name that sanitizes to "." or ".." (Sanitizer keeps dots): no node can have it, as
    ZooKeeper refuses relative path steps."""


def node_path(key: EntityKey) -> str:
    path = f"/config/{entity_path(key)}"
    if any(step in (".", "..") for step in path.split("/")):
        raise InvalidEntityPath(f'Invalid path string "{path}" caused by relative paths not '
                                "allowed")
    return path


def parse_entity_path(path: str) -> EntityKey | None:
    """The entity a notification names, None for anything that is not a client quota entity."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == USERS and parts[1]:
        return parts[1], None
    if len(parts) == 4 and parts[0] == USERS and parts[2] == CLIENTS and parts[1] and parts[3]:
        return parts[1], parts[3]
    if len(parts) == 2 and parts[0] == CLIENTS and parts[1]:
        return None, parts[1]
    return None


def _config_of(data: bytes | None) -> dict[str, str]:
    try:
        body = json.loads(data) if data else {}
        return {str(k): str(v) for k, v in (body.get("config") or {}).items()}
    except (ValueError, AttributeError):
        return {}


class ClientQuotaConfigs:
    """Reads and writes the entity config nodes (quota keys and, for users, SCRAM credentials:
    a write keeps what it does not change)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def fetch(self, key: EntityKey) -> dict[str, str]:
        """An entity's whole config ({} when it has no node)."""
        try:
            data, _ = await self.store.get(node_path(key))
        except NoNodeError:
            return {}
        return _config_of(data)

    async def fetch_all(self) -> dict[EntityKey, dict[str, str]]:
        """Every user, client-id and (user, client-id) entity node (Kafka's
        fetchAllEntityConfigs and fetchAllChildEntityConfigs), read in batches off the loop: a
        user node's child count says whether it has clients to list."""
        users = await self._children(paths.USER_CONFIGS)
        clients = await self._children(paths.CLIENT_CONFIGS)
        keys: list[EntityKey] = [(u, None) for u in users] + [(None, c) for c in clients]
        read = await self.store.get_many([node_path(k) for k in keys])
        pairs: list[EntityKey] = [
            (user, client) for (user, _), got in zip(keys, read, strict=True)
            if user is not None and got is not None and got[1].num_children > 0
            for client in await self._children(f"{paths.USER_CONFIGS}/{user}/{CLIENTS}")]
        read += await self.store.get_many([node_path(k) for k in pairs])
        return {key: _config_of(got[0]) for key, got in zip(keys + pairs, read, strict=True)
                if got is not None}

    async def _children(self, path: str) -> list[str]:
        try:
            children = await self.store.get_children(path)
        except NoNodeError:
            return []
        # a child no entity can have (written to the store by hand) is no entity
        return sorted(c for c in children if c not in (".", ".."))

    async def change(self, key: EntityKey, config: dict[str, str]) -> None:
        """Write the entity's whole config and announce it to every broker."""
        path = node_path(key)
        body = {"version": 1, "config": config}
        try:
            await self.store.set_json(path, body)
        except NoNodeError:
            try:
                await self.store.create_json(path, body, makepath=True)
            except NodeExistsError:
                await self.store.set_json(path, body)
        await self.store.create_json(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
                               {"version": 2, "entity_path": entity_path(key)},
                               sequence=True, makepath=True)

