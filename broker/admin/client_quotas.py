"""DescribeClientQuotas and AlterClientQuotas as ZooKeeper-mode Kafka answers them
(ZkAdminManager.describeClientQuotas / alterClientQuotas): filters with EXACT, DEFAULT and ANY
components, strict or not; alterations validated key by key, then written to the entity's node."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

from broker.metadata.client_quota_configs import (
    DEFAULT,
    ClientQuotaConfigs,
    EntityKey,
    InvalidEntityPath,
    desanitize_entity_name,
    sanitize_entity_name,
)
from broker.metadata.store import MetadataStoreError
from protocol.errors import ErrorCode, KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
LONG, DOUBLE, PASSWORD = "LONG", "DOUBLE", "PASSWORD"
# What a user (or user and client-id) node may hold (Kafka's DynamicConfig.User), and a client's
CLIENT_KEYS = {"producer_byte_rate": LONG, "consumer_byte_rate": LONG,
               "request_percentage": DOUBLE, "controller_mutation_rate": DOUBLE}
USER_KEYS = {**CLIENT_KEYS, "SCRAM-SHA-256": PASSWORD, "SCRAM-SHA-512": PASSWORD}
EPSILON = 1e-6

# An entity as the client names it: entity type -> name (None: the default entity), in the order
# Kafka's HashMap yields them (client-id before user)
Entity = dict[str, str | None]


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def java_map_order(entity: Entity) -> Entity:
    """The entries in the order Kafka's HashMap (16 buckets) yields them, which is the order its
    answers list an entity's parts: by bucket of the type's String.hashCode, then as added."""

    def bucket(name: str) -> int:
        h = 0
        for ch in name.encode("utf-16-be").hex(" ", 2).split():
            h = (31 * h + int(ch, 16)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15

    return dict(sorted(entity.items(), key=lambda item: bucket(item[0])))


def _entity(user: str | None | bool, client: str | None | bool) -> Entity:
    """client-id first, then user, as the response lists them; False: not part of it."""
    out: Entity = {}
    if client is not False:
        out[CLIENT_ID] = client  # type: ignore[assignment]
    if user is not False:
        out[USER] = user  # type: ignore[assignment]
    return out


def _components(components: list[FilterComponent]) -> dict[str, FilterComponent]:
    by_type: dict[str, FilterComponent] = {}
    for c in components:
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Unexpected match type: {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "An exact match needs a name")
        if c.entity_type in (USER, CLIENT_ID, IP):
            if c.entity_type in by_type:
                kind = {USER: "user", CLIENT_ID: "client", IP: "ip"}[c.entity_type]
                raise _invalid(f"Duplicate {kind} filter component entity type")
            by_type[c.entity_type] = c
        elif c.entity_type == "":
            raise _invalid("Unexpected empty filter component entity type")
        else:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                             f"Custom entity type '{c.entity_type}' not supported")
    if (USER in by_type or CLIENT_ID in by_type) and IP in by_type:
        raise _invalid("Invalid entity filter component combination, IP filter component should "
                       "not be used with user or clientId filter component.")
    return by_type


def _wanted_name(c: FilterComponent | None) -> tuple[bool, str | None]:
    """(matches one entity exactly, its name or None for the default one)"""
    if c is None or c.match_type == MATCH_ANY:
        return False, None
    return True, c.match if c.match_type == MATCH_EXACT else None


def _matches(c: FilterComponent | None, name: str | None | bool, strict: bool) -> bool:
    """`name` False: the entity has no such part."""
    if c is None:
        return name is False or not strict
    if c.match_type == MATCH_ANY:
        return name is not False
    _, wanted = _wanted_name(c)
    return name is not False and name == wanted


async def describe(configs: ClientQuotaConfigs, components: list[FilterComponent],
                   strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """The entities the filter matches that have quota values, with those values."""
    with _store_errors():
        return await _describe(configs, components, strict)


async def _describe(configs: ClientQuotaConfigs, components: list[FilterComponent],
                    strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    by_type = _components(components)
    if IP in by_type:
        return []  # IP quotas (connection_creation_rate) are not kept here: none match
    user_c, client_c = by_type.get(USER), by_type.get(CLIENT_ID)
    exact_user, user = _wanted_name(user_c)
    exact_client, client = _wanted_name(client_c)
    exclude_user = strict and user_c is None
    exclude_client = strict and client_c is None
    # Read only what the filter can match, as Kafka does: one node, or every node of a level
    wanted_all = ((not exclude_user and not exact_client and not (exact_user and exclude_client))
                  or (not exact_user and not exclude_client
                      and not (exclude_user and exact_client))
                  or (not exclude_user and not exclude_client
                      and not (exact_user and exact_client)))
    every = await configs.fetch_all() if wanted_all else {}

    async def level(one: EntityKey, exact: bool, everything: bool, shape) -> dict:
        if exact:
            return {one: await configs.fetch(one)}
        if not everything:
            return {}
        return {k: v for k, v in every.items() if shape(k)}

    found: dict[EntityKey, dict[str, str]] = {}
    found |= await level((sanitize_entity_name(user), None), exact_user and exclude_client,
                   not exclude_user and not exact_client, lambda k: k[1] is None)
    found |= await level((None, sanitize_entity_name(client)), exclude_user and exact_client,
                   not exact_user and not exclude_client, lambda k: k[0] is None)
    found |= await level((sanitize_entity_name(user), sanitize_entity_name(client)),
                   exact_user and exact_client, not exclude_user and not exclude_client,
                   lambda k: k[0] is not None and k[1] is not None)
    out = []
    for (u, c), config in found.items():
        user_name = False if u is None else desanitize_entity_name(u)
        client_name = False if c is None else desanitize_entity_name(c)
        values = {k: v for k, v in config.items() if k in CLIENT_KEYS}
        if values and _matches(user_c, user_name, strict) and _matches(client_c, client_name,
                                                                        strict):
            out.append((_entity(user_name, client_name), _values(values)))
    return out


def _values(config: dict[str, str]) -> dict[str, float]:
    out = {}
    for key, value in config.items():
        try:
            out[key] = float(value)
        except ValueError:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Unexpected client quota configuration value: {key} -> {value}"
                             ) from None
    return out


def entity_key(entity: Entity) -> tuple[EntityKey, dict[str, str]]:
    """The node of an entity to alter, and the keys it may hold."""
    if not entity:
        raise _invalid("Invalid empty client quota entity")
    parts: dict[str, str] = {}
    for entity_type, name in entity.items():
        if entity_type not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise _invalid(f"Empty {entity_type} not supported")
        parts[entity_type] = sanitize_entity_name(name)
    user, client, ip = parts.get(USER), parts.get(CLIENT_ID), parts.get(IP)
    if ip is not None:
        if user is not None or client is not None:
            raise _invalid("Invalid quota entity combination, IP entity should not be used with "
                           "user/client ID entity.")
        raise _invalid("IP quotas (connection_creation_rate) are not supported by this broker")
    if user is not None:
        return (user, client), USER_KEYS
    assert client is not None
    return (None, client), CLIENT_KEYS


async def alter(configs: ClientQuotaConfigs, entity: Entity,
                ops: list[tuple[str, float, bool]], validate_only: bool) -> None:
    """Apply (key, value, remove) operations to one entity's node; KafkaError for the first
    problem (the node is then left as it was)."""
    with _store_errors():
        await _alter(configs, entity, ops, validate_only)


async def _alter(configs: ClientQuotaConfigs, entity: Entity,
                 ops: list[tuple[str, float, bool]], validate_only: bool) -> None:
    key, allowed = entity_key(entity)
    config = await configs.fetch(key)
    for name, value, remove in ops:
        if remove:
            config.pop(name, None)
            continue
        kind = allowed.get(name)
        if kind is None:
            raise _invalid(f"Invalid configuration key {name}")
        if kind == DOUBLE:
            config[name] = java_double_string(value)
        elif kind == LONG:
            whole = _java_long(value + EPSILON)
            if not abs(whole - value) <= EPSILON:
                raise _invalid(f"Configuration {name} must be a LONG value")
            config[name] = str(whole)
        else:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unexpected config type {kind}")
    if not validate_only:
        await configs.change(key, config)


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """What ZooKeeper would refuse (a "." or ".." name) or fail on answers as Kafka's
    ZkAdminManager does with an unexpected exception: UNKNOWN_SERVER_ERROR."""
    try:
        yield
    except (InvalidEntityPath, MetadataStoreError) as exc:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from None


def _java_long(value: float) -> int:
    """Java's (long) cast of a double: NaN is 0, out-of-range values clamp."""
    if math.isnan(value):
        return 0
    if value >= 2**63:
        return 2**63 - 1
    if value <= -(2**63):
        return -(2**63)
    return int(value)


def java_double_string(value: float) -> str:
    """Java's Double.toString (what Kafka writes to the node): "50.0", "1.0E7", "NaN"."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        if "e" not in text:
            return text
    digits = repr(float(value)).replace("-", "")
    if "e" in digits:  # repr's own shortest digits
        mantissa, _, exponent = repr(float(value)).partition("e")
    else:
        sign = "-" if value < 0 else ""
        significant = digits.replace(".", "").lstrip("0").rstrip("0") or "0"
        mantissa = f"{sign}{significant[0]}.{significant[1:] or '0'}"
        exponent = str(math.floor(math.log10(abs(value))))
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exponent)}"


__all__ = ["CLIENT_ID", "DEFAULT", "IP", "USER", "FilterComponent", "alter", "describe"]
