"""Kafka's ClientQuotaManager: one quota type's bounds per (user, client-id) entity with Kafka's
precedence of the eight entity combinations, a rate sensor per quota entity in use, and the
throttle time a record earns. ClientRequestQuotaManager is the request-percentage variant."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.metadata.client_quota_configs import DEFAULT
from broker.quota.rate import QuotaSensor, as_int, throttle_time_ms

NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000  # Kafka drops a sensor idle for an hour
UNLIMITED = float(2**63 - 1)  # Long.MaxValue, Kafka's bound for no quota


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Where a quota is configured: `user` is a sanitized user name or DEFAULT, `client_id` a
    client id (as the client sends it) or DEFAULT; None: that part is not in the entity.
    A client whose id is literally "<default>" is not the default entity: `default_client`
    tells them apart (quota_managers.quota_entity reads it from the node's sanitized name)."""

    user: str | None
    client_id: str | None
    default_client: bool = False  # client_id is the default entity (not a client named so)


def entity(user: str | None, client_id: str | None, *, default_user: bool = False,
           default_client: bool = False) -> QuotaEntity:
    """A quota entity from its parts; `default_*` marks the `<default>` entity of that part."""
    return QuotaEntity(DEFAULT if default_user else user,
                       DEFAULT if default_client else client_id, default_client)


# Kafka's QuotaTypes: which levels have ever had a quota, so the metric tags can skip the lookup
NO_QUOTAS, CLIENT_ID_QUOTAS, USER_QUOTAS, USER_CLIENT_ID_QUOTAS = 0, 1, 2, 4

Tags = tuple[str, str]  # (sanitized user or "", client id or "")


class ClientQuotaManager:
    """Bounds and sensors of one quota type (produce bytes, fetch bytes or request time)."""

    def __init__(self, quota_type: str, samples: int, window_seconds: int,
                 now_ms: Callable[[], int]) -> None:
        self.quota_type = quota_type
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.now_ms = now_ms
        self._quotas: dict[QuotaEntity, float] = {}
        self._types_enabled = NO_QUOTAS
        self._sensors: dict[Tags, QuotaSensor] = {}
        self.throttled = 0  # records that took the rate over the bound
        self._last_purge_ms = 0

    @property
    def quotas_enabled(self) -> bool:
        """True once any quota of this type was set (as Kafka, until a restart)."""
        return self._types_enabled != NO_QUOTAS

    # -- bounds --------------------------------------------------------------------------------

    def update_quota(self, quota_entity: QuotaEntity, bound: float | None) -> None:
        """Set (or with None remove) the bound of an entity; sensors in use take it at once."""
        if quota_entity.user is not None:
            self._types_enabled |= (USER_CLIENT_ID_QUOTAS if quota_entity.client_id is not None
                                    else USER_QUOTAS)
        elif quota_entity.client_id is not None:
            self._types_enabled |= CLIENT_ID_QUOTAS
        if bound is None:
            self._quotas.pop(quota_entity, None)
        else:
            self._quotas[quota_entity] = bound
        for tags, sensor in self._sensors.items():
            sensor.bound = self.quota_limit(tags)

    def quota_metric_tags(self, user: str, client_id: str) -> Tags:
        """The tags of the sensor a client's usage is recorded on: those of the most specific
        entity with a quota, so every client a `<default>` or user quota covers shares one."""
        enabled = self._types_enabled
        if enabled in (NO_QUOTAS, CLIENT_ID_QUOTAS):
            return "", client_id
        if enabled == USER_QUOTAS:
            return user, ""
        if enabled == USER_CLIENT_ID_QUOTAS:
            return user, client_id
        q = self._quotas
        for key, tags in (
                (entity(user, client_id), (user, client_id)),
                (entity(user, None, default_client=True), (user, client_id)),
                (entity(user, None), (user, "")),
                (entity(None, client_id, default_user=True), (user, client_id)),
                (entity(None, None, default_user=True, default_client=True), (user, client_id)),
                (entity(None, None, default_user=True), (user, ""))):
            if key in q:
                return tags
        return "", client_id

    def quota_limit(self, tags: Tags) -> float:
        """The bound of a sensor's tags (Kafka's DefaultQuotaCallback.quotaLimit)."""
        user, client_id = tags
        q = self._quotas
        if user and client_id:
            chain = (entity(user, client_id), entity(user, None, default_client=True),
                     entity(None, client_id, default_user=True),
                     entity(None, None, default_user=True, default_client=True))
        elif user:
            chain = (entity(user, None), entity(None, None, default_user=True))
        elif client_id:
            chain = (entity(None, client_id), entity(None, None, default_client=True))
        else:
            chain = ()
        for key in chain:
            if key in q:
                return q[key]
        return UNLIMITED

    def quota(self, user: str, client_id: str) -> float:
        """The bound that applies to a client (tests, the control API)."""
        return self.quota_limit(self.quota_metric_tags(user, client_id))

    # -- recording ---------------------------------------------------------------------------

    def sensor(self, user: str, client_id: str) -> QuotaSensor:
        tags = self.quota_metric_tags(user, client_id)
        sensor = self._sensors.get(tags)
        if sensor is None:
            self._purge_inactive()
            sensor = QuotaSensor(self.samples, self.window_ms, self.quota_limit(tags))
            self._sensors[tags] = sensor
        return sensor

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most a client may use at once without being throttled for it alone (Kafka caps a
        fetch's max bytes with it)."""
        if not self.quotas_enabled:
            return UNLIMITED
        bound = self.quota(user, client_id)
        return bound * (self.samples - 1) * self.window_ms / 1000

    def record(self, user: str, client_id: str, value: float) -> int:
        """Record usage now; the throttle time in ms it earned (0: within the quota)."""
        if not self.quotas_enabled:
            return 0
        violation = self.sensor(user, client_id).record(value, self.now_ms())
        if violation is None:
            return 0
        self.throttled += 1
        return self.throttle_time(violation)

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled fetch answers no data, so it used none)."""
        if self.quotas_enabled:
            self.sensor(user, client_id).record(-value, self.now_ms(), check=False)

    def throttle_time(self, violation) -> int:
        return as_int(throttle_time_ms(violation))

    def _purge_inactive(self) -> None:
        # Bounded memory under many client ids: sensors idle for an hour go, checked at most
        # once a minute.
        now = self.now_ms()
        if now - self._last_purge_ms < 60_000:
            return
        self._last_purge_ms = now
        for tags in [t for t, s in self._sensors.items()
                     if now - s.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS]:
            del self._sensors[tags]

    def stats(self) -> dict:
        return {"quotas": len(self._quotas), "sensors": len(self._sensors),
                "throttled": self.throttled}


class ClientRequestQuotaManager(ClientQuotaManager):
    """request_percentage: the share of one request handler's time (here: the broker's time on
    the loop for the client's requests, in percent per second); a throttle never exceeds one
    quota window (Kafka's ClientRequestQuotaManager.maxThrottleTimeMs)."""

    def record_nanos(self, user: str, client_id: str, nanos: int) -> int:
        return self.record(user, client_id, nanos * NANOS_TO_PERCENTAGE_PER_SECOND)

    def throttle_time(self, violation) -> int:
        return as_int(min(throttle_time_ms(violation), self.window_ms))
