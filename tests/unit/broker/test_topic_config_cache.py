"""A broker's topic config cache: one store read per topic, then Kafka's /config/changes
notifications (as AlterConfigs writes them) bring changes; nothing is read per request."""

from __future__ import annotations

from broker.metadata import zk_paths as paths
from broker.metadata.embedded_store import EmbeddedMetadataStore
from broker.metadata.topic_config_cache import KEEP_NOTIFICATIONS, TopicConfigCache
from broker.metadata.topic_config_cache import notification_body as body
from tests.harness import watches_settled


class CountingStore(EmbeddedMetadataStore):
    """The embedded store, counting the reads of topic config nodes."""

    config_reads = 0

    async def get(self, path, watch=None):
        self.config_reads += path.startswith(paths.TOPIC_CONFIGS + "/")
        return await super().get(path, watch)

    async def get_many(self, paths_):
        self.config_reads += sum(p.startswith(paths.TOPIC_CONFIGS + "/") for p in paths_)
        return await super().get_many(paths_)


async def alter(store, topic: str, config: dict[str, str]) -> None:
    """What AdminManager.alter_topic_configs writes; returns once the cache's watch has read the
    notification (it reads in a task of its own)."""
    if await store.exists(paths.topic_config(topic)) is None:
        await store.create_json(paths.topic_config(topic), {"version": 1, "config": config})
    else:
        await store.set_json(paths.topic_config(topic), {"version": 1, "config": config})
    await store.create_json(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}", body(topic),
                            sequence=True, makepath=True)
    await watches_settled()


async def make() -> tuple[CountingStore, TopicConfigCache, list]:
    store = CountingStore(None)
    for name in ("a", "b"):
        await store.create_json(paths.topic_config(name), {"version": 1, "config": {}},
                                makepath=True)
    changes: list = []
    cache = TopicConfigCache(store, lambda t, o: changes.append((t, o)))
    await cache.start()
    return store, cache, changes


async def test_read_once_per_topic_then_from_the_cache():
    store, cache, _ = await make()
    assert await cache.overrides(["a", "b", "a"]) == {"a": {}, "b": {}}
    for _ in range(5):  # LeaderAndIsr / UpdateMetadata again and again
        assert await cache.overrides(["a", "b"]) == {"a": {}, "b": {}}
    assert store.config_reads == 2
    # A name with no config node yet (forged, or being created) is not remembered as empty.
    assert await cache.overrides(["later"]) == {"later": {}}
    await store.create_json(paths.topic_config("later"), {"version": 1, "config": {"a": "1"}})
    assert await cache.overrides(["later"]) == {"later": {"a": "1"}}


async def test_a_notification_rereads_that_topic_only_and_reports_the_change():
    store, cache, changes = await make()
    await cache.overrides(["a", "b"])
    await alter(store, "a", {"retention.ms": "1000"})
    assert changes == [("a", {"retention.ms": "1000"})]
    assert await cache.overrides(["a", "b"]) == {"a": {"retention.ms": "1000"}, "b": {}}
    assert store.config_reads == 3
    await alter(store, "c", {"retention.ms": "5"})  # never asked for here: nothing to re-read
    assert store.config_reads == 3 and len(changes) == 1


async def test_a_deleted_topic_is_read_afresh_and_old_notifications_are_purged():
    store, cache, _ = await make()
    await cache.overrides(["a"])
    cache.forget("a")
    await store.set_json(paths.topic_config("a"),
                         {"version": 1, "config": {"cleanup.policy": "compact"}})
    assert await cache.overrides(["a"]) == {"a": {"cleanup.policy": "compact"}}
    for i in range(KEEP_NOTIFICATIONS + 5):
        await alter(store, "b", {"retention.ms": str(i)})
    assert len(await store.get_children(paths.CONFIG_CHANGES)) <= KEEP_NOTIFICATIONS + 1
    cache.stop()
