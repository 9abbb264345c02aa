"""Group configs (Kafka 4's GroupConfig, config resource type GROUP): per-group settings a client
alters with IncrementalAlterConfigs, kept at /config/groups/<group> (a path of ours: ZooKeeper-
mode Kafka has no group configs) and read by brokers on first use, re-read after a change
notification ("groups/<group>")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.config import BrokerConfig
from broker.metadata.sanitizer import desanitize, sanitize
from broker.metadata.store import MetadataStore, MetadataStoreError, NoNodeError
from protocol.errors import ErrorCode, KafkaError

GROUP_CONFIGS = "/config/groups"  # child per sanitized group id: {"version": 1, "config": {...}}
ENTITY = "groups"


@dataclass(frozen=True, slots=True)
class GroupConfigSpec:
    name: str
    broker_default: str | None  # the broker property its default comes from, else `default`
    default: str
    check: Callable[[str], bool]
    doc: str


def _positive_int(value: str) -> bool:
    return value.isdecimal() and 0 < int(value) < 2**31


def _one_of(*allowed: str) -> Callable[[str], bool]:
    return lambda value: value in allowed


SPECS = {spec.name: spec for spec in (
    GroupConfigSpec("consumer.session.timeout.ms", "group.consumer.session.timeout.ms", "",
                    _positive_int, "a consumer group member's session timeout"),
    GroupConfigSpec("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms", "",
                    _positive_int, "a consumer group member's heartbeat interval"),
    GroupConfigSpec("share.session.timeout.ms", "group.share.session.timeout.ms", "",
                    _positive_int, "a share group member's session timeout"),
    GroupConfigSpec("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", "",
                    _positive_int, "a share group member's heartbeat interval"),
    GroupConfigSpec("share.record.lock.duration.ms", "group.share.record.lock.duration.ms", "",
                    _positive_int, "how long a share consumer holds the records it acquired"),
    GroupConfigSpec("share.auto.offset.reset", None, "latest", _one_of("earliest", "latest"),
                    "where a share group starts reading a partition it never read"),
    GroupConfigSpec("share.isolation.level", None, "read_uncommitted",
                    _one_of("read_uncommitted", "read_committed"),
                    "read_committed: a share group is given records below the last stable "
                    "offset only, and never those of aborted transactions"),
    GroupConfigSpec("share.delivery.count.limit", "group.share.delivery.count.limit", "",
                    _positive_int, "deliveries of a record before it is archived"),
)}


def group_config_path(group_id: str) -> str:
    return f"{GROUP_CONFIGS}/{sanitize(group_id)}"


def notification_body(group_id: str) -> dict:
    return {"version": 2, "entity_path": f"{ENTITY}/{sanitize(group_id)}"}


def validate(group_id: str, overrides: dict[str, str]) -> None:
    """INVALID_CONFIG for a key that is no group config or a value it does not take."""
    for name, value in overrides.items():
        spec = SPECS.get(name)
        if spec is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        if not spec.check(value):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration "
                             f"{name} of group {group_id}")


def default_value(config: BrokerConfig, spec: GroupConfigSpec) -> str:
    return str(config[spec.broker_default]) if spec.broker_default else spec.default


class GroupConfigCache:
    """Each group's overrides as this broker last read them (a store read on first use)."""

    def __init__(self, config: BrokerConfig, store: MetadataStore) -> None:
        self.config = config
        self._store = store
        self._overrides: dict[str, dict[str, str]] = {}

    async def overrides(self, group_id: str) -> dict[str, str]:
        """The group's overrides, read from the store the first time (the defaults, not kept,
        while the store cannot be reached: the next request reads again)."""
        cached = self._overrides.get(group_id)
        if cached is None:
            try:
                data, _ = await self._store.get_json(group_config_path(group_id))
            except NoNodeError:
                data = None
            except MetadataStoreError:
                return {}
            cached = self._overrides[group_id] = dict((data or {}).get("config", {}))
        return cached

    def value(self, group_id: str, name: str) -> str:
        """The group's setting as last read (`overrides` first), else its default."""
        override = self._overrides.get(group_id, {}).get(name)
        return override if override is not None else default_value(self.config, SPECS[name])

    def on_notification(self, entity_path: str) -> bool:
        """A change notification: True when it was a group's (forgotten, read again on use)."""
        kind, _, name = entity_path.partition("/")
        if kind != ENTITY:
            return False
        self._overrides.pop(desanitize(name), None)
        return True
