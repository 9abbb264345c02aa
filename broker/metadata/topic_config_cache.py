"""Topics' config overrides as this broker last read them from the store, kept current through
Kafka's config change notifications (/config/changes, ZkNodeChangeNotificationListener's job).

A topic's overrides are read once, when a controller request first names it (as Kafka reads
them when it creates a log); AlterConfigs then writes a sequential notification naming the
topic, and every broker re-reads that topic's node: no store read per request. Notifications of
other entities (client quotas' users/... and clients/...) go to `on_entity_change`.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Awaitable, Callable

from broker.logs import get_logger
from broker.metadata import zk_paths as paths
from broker.metadata.recipes import ChildrenWatch
from broker.metadata.store import (
    ConnectionLossError,
    MetadataStore,
    MetadataStoreError,
    NoNodeError,
    SessionExpiredError,
)
from broker.metadata.topic_names import is_valid_topic_name

log = get_logger("kafka_sim.topic_config_cache")

# Notifications kept once handled: a broker more than this many behind (stopped, expired) reads
# every topic afresh anyway. Kafka purges them by age (15 minutes); our stat has no ctime.
KEEP_NOTIFICATIONS = 100

OnChange = Callable[[str, dict[str, str]], None]
OnEntityChange = Callable[[str], Awaitable[None] | None]


def notification_body(topic: str) -> dict:
    """What AlterConfigs writes under /config/changes (Kafka's version 2 entity path)."""
    return {"version": 2, "entity_path": f"topics/{topic}"}


def _sequence(child: str) -> int:
    digits = child[len(paths.CONFIG_CHANGE_PREFIX):]
    return int(digits) if digits.isdigit() else -1


class TopicConfigCache:
    """Overrides per topic; `on_change(topic, overrides)` when a notification changed a topic
    this broker has read (its logs and metadata take the new config)."""

    def __init__(self, store: MetadataStore, on_change: OnChange,
                 on_entity_change: OnEntityChange | None = None) -> None:
        self._store = store
        self._on_change = on_change
        # Notifications of other entities (client quotas' users/..., clients/...): their path
        self._on_entity_change = on_entity_change
        self._overrides: dict[str, dict[str, str]] = {}
        self._changed: dict[str, int] = {}  # topic -> how many notifications named it
        self._last_seen = -1
        self._watch: ChildrenWatch | None = None

    async def start(self) -> None:
        """Follow the notifications written from now on (older ones predate every read)."""
        await self._store.ensure_path(paths.CONFIG_CHANGES)
        children = await self._store.get_children(paths.CONFIG_CHANGES)
        self._last_seen = max((_sequence(c) for c in children), default=-1)
        self._watch = ChildrenWatch(self._store, paths.CONFIG_CHANGES, self._on_children)
        await self._watch.start()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._overrides.clear()

    def forget(self, topic: str) -> None:
        """The topic was deleted: a topic created again under its name is read afresh."""
        self._overrides.pop(topic, None)

    async def overrides(self, topics: list[str]) -> dict[str, dict[str, str]]:
        """Each topic's overrides, the ones not read yet read in one batch."""
        missing = [t for t in dict.fromkeys(topics)
                   if t not in self._overrides and is_valid_topic_name(t)]
        answers: dict[str, dict[str, str]] = {}
        if missing:
            changed = {t: self._changed.get(t, 0) for t in missing}
            read = await self._store.get_many([paths.topic_config(t) for t in missing])
            for topic, got in zip(missing, read, strict=True):
                answers[topic] = _parse(got[0]) if got is not None else {}
                # No node yet (a topic being created, or a forged request's name): nothing kept,
                # as a notification for it while reading (the read may be older): answer what
                # was read, and read again when a request next names the topic.
                if got is not None and self._changed.get(topic, 0) == changed[topic]:
                    self._overrides[topic] = answers[topic]
        return {t: dict(self._overrides.get(t, answers.get(t)) or {}) for t in topics}

    async def _on_children(self, children: list[str]) -> None:
        # A burst of notifications is one call (the watch reads once for all of them); each
        # child's sequence is parsed once.
        numbered = [(_sequence(c), c) for c in children]
        fresh = sorted(n for n in numbered if n[0] > self._last_seen)
        for sequence, child in fresh:
            # an unreachable store raises here: the watch reads again and goes on from this one
            await self._handle(f"{paths.CONFIG_CHANGES}/{child}")
            self._last_seen = sequence
        if len(numbered) <= KEEP_NOTIFICATIONS:
            return
        for _, child in sorted(numbered)[:-KEEP_NOTIFICATIONS]:
            # every broker purges: one of them wins; an unreachable store purges next time
            with contextlib.suppress(NoNodeError, MetadataStoreError):
                await self._store.delete(f"{paths.CONFIG_CHANGES}/{child}")

    async def _handle(self, path: str) -> None:
        try:
            data, _ = await self._store.get(path)
            entity = (json.loads(data) if data else {}).get("entity_path", "")
        except NoNodeError:
            return  # purged: its change is older than what any read since then saw
        except (ConnectionLossError, SessionExpiredError):
            raise
        except (MetadataStoreError, ValueError, AttributeError) as exc:
            log.warning("config change notification unreadable", path=path, reason=str(exc))
            return
        kind, _, topic = str(entity).partition("/")
        if kind != "topics" and self._on_entity_change is not None:
            result = self._on_entity_change(str(entity))
            if inspect.isawaitable(result):
                await result
            return
        if kind != "topics" or not is_valid_topic_name(topic):
            return
        self._changed[topic] = self._changed.get(topic, 0) + 1
        if topic not in self._overrides:
            return  # never read here: the first request that names it reads it
        try:
            data, _ = await self._store.get(paths.topic_config(topic))
            overrides = _parse(data)
        except NoNodeError:
            overrides = {}
        except MetadataStoreError as exc:  # read again when a request next names it
            log.warning("topic config not re-read", topic=topic, reason=str(exc))
            self._overrides.pop(topic, None)
            return
        if overrides != self._overrides[topic]:
            self._overrides[topic] = overrides
            self._on_change(topic, dict(overrides))


def _parse(data: bytes) -> dict[str, str]:
    try:
        body = json.loads(data) if data else {}
        return {str(k): str(v) for k, v in (body.get("config") or {}).items()}
    except (ValueError, AttributeError):
        return {}
