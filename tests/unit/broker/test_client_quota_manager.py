"""Kafka's ClientQuotaManager rules without a broker: the eight entity levels' precedence, which
clients share a sensor, the sampled rate and the throttle-time formula."""

from __future__ import annotations

import pytest

from broker.config import build_config
from broker.metadata.client_quota_configs import DEFAULT, ClientQuotaConfigs, parse_entity_path
from broker.metadata.embedded_store import EmbeddedMetadataStore
from broker.metadata.sanitizer import sanitize
from broker.quota.client_quota_manager import (
    UNLIMITED,
    ClientQuotaManager,
    ClientRequestQuotaManager,
    entity,
)
from broker.quota.quota_managers import QuotaManagers, quota_entity
from broker.quota.rate import QuotaSensor
from timer import ManualClock, SystemTimer


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def manager(clock: Clock | None = None) -> ClientQuotaManager:
    return ClientQuotaManager("produce", 11, 1, clock or Clock())


LEVELS = [  # Kafka's order, most specific first, each with the quota it is given below
    (("u", "c"), 1.0),
    (("u", DEFAULT), 2.0),
    (("u", None), 3.0),
    ((DEFAULT, "c"), 4.0),
    ((DEFAULT, DEFAULT), 5.0),
    ((DEFAULT, None), 6.0),
    ((None, "c"), 7.0),
    ((None, DEFAULT), 8.0),
]


@pytest.mark.parametrize("removed", range(len(LEVELS)))
def test_the_most_specific_level_wins(removed):
    quotas = manager()
    for key, bound in LEVELS:
        quotas.update_quota(quota_entity(key), bound)
    # Taking away every level above `removed` leaves it in charge for user u with client c
    for key, _ in LEVELS[:removed]:
        quotas.update_quota(quota_entity(key), None)
    assert quotas.quota("u", "c") == LEVELS[removed][1]


def test_clients_under_one_quota_share_its_sensor():
    quotas = manager()
    quotas.update_quota(entity(None, None, default_user=True), 100)  # every user
    quotas.update_quota(entity(None, "solo"), 50)  # a client-id quota (user quotas come first)
    assert quotas.quota_metric_tags("alice", "a") == quotas.quota_metric_tags("alice", "b") \
        == ("alice", "")
    assert quotas.sensor("alice", "a") is quotas.sensor("alice", "b")
    assert quotas.sensor("bob", "a") is not quotas.sensor("alice", "a")
    assert quotas.quota("alice", "solo") == 100
    quotas.update_quota(entity("alice", "solo"), 10)  # (user, client-id): its own sensor
    assert quotas.quota_metric_tags("alice", "solo") == ("alice", "solo")
    assert quotas.quota("alice", "solo") == 10


def test_a_client_named_default_is_not_the_default_entity():
    quotas = manager()
    quotas.update_quota(quota_entity((None, DEFAULT)), 8)
    quotas.update_quota(quota_entity((None, sanitize("<default>"))), 9)
    assert quotas.quota("", "<default>") == 9
    assert quotas.quota("", "other") == 8
    assert parse_entity_path("users/%3Cdefault%3E/clients/<default>") == (
        "%3Cdefault%3E", "<default>")
    assert parse_entity_path("topics/t") is None and parse_entity_path("users/") is None


def test_no_quota_no_recording():
    quotas = manager()
    assert not quotas.quotas_enabled
    assert quotas.record("u", "c", 10**12) == 0
    assert quotas.quota("u", "c") == UNLIMITED


def test_throttle_time_is_kafkas_formula_over_the_sampled_window():
    clock = Clock()
    quotas = manager(clock)
    quotas.update_quota(entity(None, "c"), 1000)
    # 10 whole windows are assumed from the start: 9000 B is 900 B/s
    assert quotas.record("", "c", 9000) == 0
    # 15000 B over 10 s is 1500 B/s: (1500 - 1000) / 1000 * 10 s
    assert quotas.record("", "c", 6000) == 5000
    # 5.5 s on: 5 whole windows elapsed, 5 more assumed, so 16000 B over 10.5 s:
    # (1523.8 - 1000) / 1000 * 10.5 s
    clock.now = 5_500
    assert quotas.record("", "c", 1000) == 5500
    clock.now = 20_000  # every sample older than 11 windows is reset
    assert quotas.record("", "c", 10) == 0
    # the fetch's take-back: a negative record, never throttled
    quotas.unrecord("", "c", 10)
    assert quotas.sensor("", "c").measure(clock.now) == 0


def test_the_window_grows_past_ten_seconds_as_samples_age():
    sensor = QuotaSensor(11, 1000, 1.0)
    sensor.record(0, 0)
    for second in range(1, 11):
        sensor.record(0, second * 1000)
    assert sensor.window_size(10_500) == 10_500  # oldest sample at 0: 10.5 s elapsed
    sensor.record(0, 11_000)  # the 12th window reuses the oldest sample
    assert sensor.window_size(11_000) == 10_000


def test_request_throttle_is_capped_at_one_window():
    quotas = ClientRequestQuotaManager("request", 11, 1, Clock())
    quotas.update_quota(entity(None, None, default_client=True), 0.001)
    assert quotas.record_nanos("", "c", 1_000_000) == 1000  # 1 ms of time: far over 0.001 %
    # capped before it is narrowed to an int: a throttle past 2^31 ms is still one window
    quotas.update_quota(entity(None, None, default_client=True), 1e-12)
    assert quotas.record_nanos("", "c", 1_000_000_000) == 1000


def test_a_zero_quota_does_not_overflow():
    quotas = manager()
    quotas.update_quota(entity(None, "c"), 0)
    assert quotas.record("", "c", 100) == 0  # Kafka's throttle time overflows to -1: none


async def test_a_load_does_not_undo_a_notification_that_came_while_it_read():
    clock = ManualClock()
    store = EmbeddedMetadataStore()
    configs = ClientQuotaConfigs(store)
    await configs.change((None, "c"), {"producer_byte_rate": "10"})
    managers = QuotaManagers(build_config({}, environ={}), SystemTimer(clock), clock.now_ms)
    real_fetch_all = configs.fetch_all

    async def slow_fetch_all():
        read = await real_fetch_all()  # what the load saw: 10
        await configs.change((None, "c"), {"producer_byte_rate": "20"})
        await managers.on_notification(configs, "clients/c")  # arrives before the load applies
        return read

    configs.fetch_all = slow_fetch_all
    await managers.load(configs)
    assert managers.produce.quota("", "c") == 20
