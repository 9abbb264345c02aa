"""A broker's quota managers (Kafka's QuotaManagers) and what applies stored client quota configs
to them (Kafka's QuotaConfigHandler): at start every entity node, then each notified entity."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker import quota
from broker.config import BrokerConfig
from broker.logs import get_logger
from broker.metadata.client_quota_configs import (
    DEFAULT,
    ClientQuotaConfigs,
    EntityKey,
    parse_entity_path,
)
from broker.metadata.sanitizer import desanitize
from broker.metadata.store import ConnectionLossError, MetadataStoreError, SessionExpiredError
from broker.quota.throttled_channels import ThrottledChannels

if TYPE_CHECKING:
    from broker.quota.client_quota_manager import (
        ClientQuotaManager,
        ClientRequestQuotaManager,
        QuotaEntity,
    )
    from timer import SystemTimer

log = get_logger("kafka_sim.quotas")

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"


def quota_entity(key: EntityKey) -> QuotaEntity:
    """The managers' entity of a stored one: the user stays sanitized, the client id is the
    client's own (Kafka's ClientIdEntity), `<default>` nodes are the default entities."""
    user, client = key
    return quota.client_quota_manager.entity(None if user in (None, DEFAULT) else user,
                  None if client in (None, DEFAULT) else desanitize(client),
                  default_user=user == DEFAULT, default_client=client == DEFAULT)


class QuotaManagers:
    """The produce, fetch and request quota managers and the throttled-connection delay queue."""

    def __init__(self, config: BrokerConfig, timer: SystemTimer,
                 now_ms: Callable[[], int]) -> None:
        self._samples, self._window = config["quota.window.num"], config["quota.window.size.seconds"]
        self._now_ms = now_ms
        self.throttled = ThrottledChannels(timer)
        # Entities notified while a load reads the store: its older read must not undo them
        self._notified_while_loading: set[EntityKey] | None = None

    @functools.cached_property
    def produce(self) -> ClientQuotaManager:
        return quota.client_quota_manager.ClientQuotaManager(
            "produce", self._samples, self._window, self._now_ms)

    @functools.cached_property
    def fetch(self) -> ClientQuotaManager:
        return quota.client_quota_manager.ClientQuotaManager(
            "fetch", self._samples, self._window, self._now_ms)

    @functools.cached_property
    def request(self) -> ClientRequestQuotaManager:
        return quota.client_quota_manager.ClientRequestQuotaManager(
            "request", self._samples, self._window, self._now_ms)

    def enabled(self, *quota_types: str) -> bool:
        """Whether any of these managers ("produce", "fetch", "request") has a quota: one never
        made has none (and is not made by asking)."""
        made = vars(self)
        return any(kind in made and made[kind].quotas_enabled for kind in quota_types)

    def apply(self, key: EntityKey, config: dict[str, str]) -> None:
        """An entity's stored config is now `config`: each manager takes its key's bound, or
        drops it when the key is gone (controller_mutation_rate is kept in the store only)."""
        target = quota_entity(key)
        for manager, name, parse in ((self.produce, PRODUCER_BYTE_RATE, _long),
                                     (self.fetch, CONSUMER_BYTE_RATE, _long),
                                     (self.request, REQUEST_PERCENTAGE, float)):
            value = config.get(name)
            bound = None
            if value is not None:
                try:
                    bound = parse(value)
                except ValueError:
                    log.warning("quota value unreadable", entity=key, key=name, value=value)
            manager.update_quota(target, bound)

    async def load(self, configs: ClientQuotaConfigs) -> None:
        """Every stored entity (a broker's start; a notification then brings each change)."""
        self._notified_while_loading = set()
        try:
            stored = await configs.fetch_all()  # off the loop: notifications may come meanwhile
            fresher = self._notified_while_loading
        finally:
            self._notified_while_loading = None
        for key, config in stored.items():
            if key not in fresher:
                self.apply(key, config)

    async def on_notification(self, configs: ClientQuotaConfigs, path: str) -> None:
        key = parse_entity_path(path)
        if key is None:
            return
        if self._notified_while_loading is not None:
            self._notified_while_loading.add(key)
        try:
            self.apply(key, await configs.fetch(key))
        except (ConnectionLossError, SessionExpiredError):
            raise  # the notification is read again once the store answers
        except (MetadataStoreError, ValueError) as exc:  # ValueError: a "." or ".." name
            log.warning("client quota config not re-read", entity=path, reason=str(exc))

    def stats(self) -> dict:
        """The throttle delay queue as a purgatory, with each manager's quotas and sensors."""
        return {**self.throttled.stats(), "quotas": {
            "produce": self.produce.stats(), "fetch": self.fetch.stats(),
            "request": self.request.stats()}}


def _long(value: str) -> float:
    return float(int(float(value)))
