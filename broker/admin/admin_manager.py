"""Topic administration: create, auto-create, delete, and the configs DescribeConfigs reports.

Creation writes the topic's replica assignment to the metadata store and (unless asked not to)
waits until the controller has elected leaders and told this broker, as Kafka's
DelayedCreatePartitions does. Validation follows Kafka's order and error codes.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
import zlib

from broker.admin.config_describer import (
    ConfigEntry,
    broker_entries,
    group_entries,
    topic_entries,
)
from broker.config import BrokerConfig
from broker.metadata import dynamic_broker_configs as dynamic
from broker.metadata import group_configs
from broker.metadata import zk_paths as paths
from broker.metadata.dynamic_broker_configs import DynamicBrokerConfigs
from broker.metadata.metadata_cache import MetadataCache, TopicInfo
from broker.metadata.store import (
    ConnectionLossError,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from broker.metadata.topic_config_cache import notification_body
from broker.metadata.topic_names import is_valid_topic_name, validate_topic_name
from protocol.errors import ErrorCode, KafkaError

# DescribeConfigs resource types.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32  # Kafka 4's group configs (KIP-848, KIP-932)


# Kafka's controller refuses a CreateTopics or CreatePartitions that would write more than
# QuorumController.MAX_RECORDS_PER_USER_OP (10,000) metadata records, one per partition, with
# POLICY_VIOLATION. The same cap bounds the partitions one request may create here, checked before
# anything proportional to the count is allocated.
MAX_PARTITIONS_PER_REQUEST = 10_000
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."


def _check_partition_budget(count: int, budget: int) -> None:
    if count > budget:
        raise KafkaError(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)


def _invalid_assignment(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def _format_assignment(assignment: dict[int, list[int]]) -> str:
    return "{" + ", ".join(f"{p}: {r}" for p, r in sorted(assignment.items())) + "}"


def validate_topic_assignment(assignment: dict[int, list[int]], live: list[int]) -> None:
    """A CreateTopics manual assignment, as Kafka's AdminZkClient.validateTopicCreate (and the
    KRaft controller for empty lists and unknown brokers): INVALID_REPLICA_ASSIGNMENT."""
    if any(not replicas for replicas in assignment.values()):
        raise _invalid_assignment("The manual partition assignment includes an empty replica list.")
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise _invalid_assignment("All partitions should have the same number of replicas")
    if any(len(set(replicas)) != len(replicas) for replicas in assignment.values()):
        raise _invalid_assignment(
            f"Duplicate replica assignment found: {_format_assignment(assignment)}")
    if sorted(assignment) != list(range(len(assignment))):
        raise _invalid_assignment("partitions should be a consecutive 0-based integer sequence")
    live_set = set(live)
    for replicas in assignment.values():
        for broker in replicas:
            if broker not in live_set:
                raise _invalid_assignment(f"The manual partition assignment includes broker "
                                          f"{broker}, but no such broker is registered.")


def validate_new_partitions_assignment(
    assignment: dict[int, list[int]], expected_rf: int, live: list[int]
) -> None:
    """CreatePartitions' manual assignment, as Kafka's AdminZkClient.validateReplicaAssignment."""
    for partition, replicas in sorted(assignment.items()):
        if not replicas:
            raise _invalid_assignment(
                f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(set(replicas)) != len(replicas):
            raise _invalid_assignment(
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition}.")
        if not set(replicas) <= set(live):
            raise _invalid_assignment(
                f"Some brokers specified for partition id {partition} are not available. "
                f"Specified brokers: {', '.join(map(str, replicas))}, "
                f"available brokers: {', '.join(map(str, sorted(live)))}.")
    bad = sorted((p, len(r)) for p, r in assignment.items() if len(r) != expected_rf)
    if bad:
        raise _invalid_assignment(
            f"Inconsistent replication factor between partitions, partition 0 has {expected_rf} "
            f"while partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
            f"[{', '.join(str(n) for _, n in bad)}], respectively.")


def assign_replicas(name: str, brokers: list[int], num_partitions: int, rf: int) -> dict[int, list[int]]:
    """Round-robin from a start that depends on the topic, so leaders spread over brokers."""
    brokers = sorted(brokers)
    start = zlib.crc32(name.encode()) % len(brokers)
    return {
        p: [brokers[(start + p + j) % len(brokers)] for j in range(rf)]
        for p in range(num_partitions)
    }


def _store_reached(method):
    """An admin operation that cannot reach the metadata store (ZooKeeper away) is answered
    REQUEST_TIMED_OUT, retriable: nothing else of the broker waits for it."""
    @functools.wraps(method)
    async def answered(*args, **kwargs):
        try:
            return await method(*args, **kwargs)
        except (ConnectionLossError, SessionExpiredError) as exc:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"the metadata store could not be reached: {exc}") from None
    return answered


class AdminManager:
    """Kafka's ZkAdminManager: topic and config changes written to the metadata store."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, cache: MetadataCache) -> None:
        self.config = config
        self.store = store
        self.cache = cache
        # Topics with '.' or '_' in their names this broker is creating (False) or wrote (True)
        # and the metadata does not show yet, by metric name ('.' as '_')
        self._reserved: dict[str, dict[str, bool]] = {}
        self._prune_reserved_at = 1024

    async def sync_store(self) -> None:
        """Wait until the writes so far are durable: callers await this before acknowledging a
        client, as Kafka answers only after ZooKeeper committed (KAFKA_STORAGE_ERROR if never)."""
        try:
            await self.store.flush()
        except MetadataStoreError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None

    @_store_reached
    async def live_brokers(self) -> list[int]:
        return [int(b) for b in await self.store.get_children(paths.BROKER_IDS)]

    @_store_reached
    async def create_topic_in_store(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
        *,
        assignment: dict[int, list[int]] | None = None,
        validate_only: bool = False,
        internal: bool = False,
        max_partitions: int = MAX_PARTITIONS_PER_REQUEST,
    ) -> TopicInfo:
        """Validate and (unless validate_only) write a new topic. `max_partitions` is what is left
        of the request's partition budget (POLICY_VIOLATION beyond it)."""
        validate_topic_name(name)
        if await self.store.exists(paths.topic(name)) is not None:
            # Kafka's AdminZkClient: a topic still being deleted holds its name until it is gone
            if await self.store.exists(paths.delete_topic(name)) is not None:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                 f"Topic '{name}' is marked for deletion.")
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        args = (name, num_partitions, replication_factor, configs, assignment, validate_only,
                internal, max_partitions)
        if "." not in name and "_" not in name:
            return await self._write_topic(*args)
        # Kafka refuses a topic whose metric name is another's ('.' and '_' are alike there):
        # INVALID_TOPIC_EXCEPTION. The others are the metadata's topics and those this broker
        # is creating or created that the metadata does not show yet (a Metadata auto-creating
        # a.b and a_b at once). Kafka lists ZooKeeper's topics; here that is a read per name.
        key = name.replace(".", "_")
        reserved = self._reserved.setdefault(key, {})
        others = {other: written for other, written in reserved.items() if other != name}
        added = name not in reserved
        if added:
            reserved[name] = False  # before any await: a concurrent creation sees it
        written = False
        try:
            colliding = set(self.cache.colliding_topics(name))
            for other, other_written in others.items():
                if not other_written or (self.cache.topic(other) is None and await
                                         self.store.exists(paths.topic(other)) is not None):
                    colliding.add(other)  # being created, or written and not yet in the metadata
                elif self.cache.topic(other) is None:
                    reserved.pop(other, None)  # deleted before the metadata showed it
            if colliding:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides "
                                 f"with existing topics: {', '.join(sorted(colliding))}")
            topic = await self._write_topic(*args)
            written = not validate_only
            return topic
        finally:
            if written:
                reserved[name] = True
            elif added:
                reserved.pop(name, None)
            for other in [o for o, w in reserved.items() if w and self.cache.topic(o) is not None]:
                del reserved[other]  # the metadata shows it now
            if not reserved:
                self._reserved.pop(key, None)
            if len(self._reserved) > self._prune_reserved_at:  # amortized: seldom, all at once
                self._reserved = {k: names for k, names in self._reserved.items() if any(
                    not w or self.cache.topic(o) is None for o, w in names.items())}
                self._prune_reserved_at = max(1024, 2 * len(self._reserved))

    async def _write_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, str | None] | None,
                           assignment: dict[int, list[int]] | None, validate_only: bool,
                           internal: bool, max_partitions: int) -> TopicInfo:
        live = await self.live_brokers()
        if assignment is None:
            if num_partitions == -1:
                num_partitions = self.config["num.partitions"]
            if replication_factor == -1:
                replication_factor = self.config["default.replication.factor"]
            if num_partitions < 1:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 "Number of partitions must be larger than 0.")
            _check_partition_budget(num_partitions, max_partitions)
            if replication_factor < 1:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0.")
            if replication_factor > len(live):
                raise KafkaError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Replication factor: {replication_factor} larger than available brokers: "
                    f"{len(live)}.",
                )
            assignment = assign_replicas(name, live, num_partitions, replication_factor)
        else:
            if not assignment:
                raise _invalid_assignment("The manual partition assignment is empty.")
            _check_partition_budget(len(assignment), max_partitions)
            validate_topic_assignment(assignment, live)
        overrides = {k: v for k, v in (configs or {}).items() if v is not None}
        self.config.log_config(overrides)  # raises INVALID_CONFIG
        topic = TopicInfo(name, uuid.uuid4(), assignment, overrides, internal)
        if validate_only:
            return topic
        config = {"version": 1, "config": overrides}
        try:
            await self.store.create_json(paths.topic_config(name), config)
        except NodeExistsError:  # left by a racing creator (two brokers auto-creating a topic at
            # once): set it, as Kafka's setOrCreateEntityConfigs; the topic node decides who won
            await self.store.set_json(paths.topic_config(name), config)
        try:
            await self.store.create_json(paths.topic(name), {
                # Kafka's TopicZNode (version 3); whether a topic is internal goes by its name
                "version": 3,
                "topic_id": str(topic.topic_id),
                "partitions": {str(p): r for p, r in assignment.items()},
                "adding_replicas": {},
                "removing_replicas": {},
            })
        except NodeExistsError:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"Topic '{name}' already exists.") from None
        return topic

    async def create_topic(self, name: str, *args, timeout_ms: int = 30_000, **kwargs) -> TopicInfo:
        topic = await self.create_topic_in_store(name, *args, **kwargs)
        if not kwargs.get("validate_only"):
            await self.sync_store()
        if (
            not kwargs.get("validate_only")
            and timeout_ms > 0
            and not await self.cache.wait_for(lambda _: self.cache.has_leaders(name), timeout_ms)
        ):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                 f"topic '{name}' was created but has no leaders yet")
        if not kwargs.get("validate_only") and timeout_ms > 0:
            # The leaders learn their partitions (LeaderAndIsr) once the controller's partition
            # states are durable: answer after that too, or a client's first produce may come first.
            await self.sync_store()
        return topic

    @_store_reached
    async def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None = None, *,
        validate_only: bool = False, timeout_ms: int = 30_000,
        max_partitions: int = MAX_PARTITIONS_PER_REQUEST,
    ) -> int:
        """Grow a topic to `count` partitions (CreatePartitions); partitions never shrink. At most
        `max_partitions` new ones (what is left of the request's budget; POLICY_VIOLATION).
        Returns how many partitions were added (or would be, with validate_only)."""
        if not is_valid_topic_name(name):  # "" or "a/b" would be no store path at all
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            data, stat = await self.store.get_json(paths.topic(name))
        except NoNodeError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None
        current = {int(p): r for p, r in data["partitions"].items()}
        if count < len(current):
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic currently has {len(current)} "
                             f"partitions, which is higher than the requested {count}.")
        if count == len(current):
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic already has {len(current)} partitions.")
        increment = count - len(current)
        _check_partition_budget(increment, max_partitions)
        live = await self.live_brokers()
        rf = len(current[0]) if 0 in current else len(next(iter(current.values())))
        if assignments is None:
            if rf > len(live):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {rf} larger than available brokers: {len(live)}.")
            grown = assign_replicas(name, live, count, rf)
            added = {p: grown[p] for p in range(len(current), count)}
        else:
            # Kafka's ZkAdminManager.createPartitions, then AdminZkClient.validateReplicaAssignment.
            unknown = sorted({b for replicas in assignments for b in replicas} - set(live))
            if unknown:
                raise _invalid_assignment(f"Unknown broker(s) in replica assignment: "
                                          f"{', '.join(map(str, unknown))}.")
            if len(assignments) != increment:
                raise _invalid_assignment(f"Increasing the number of partitions by {increment} "
                                          f"but {len(assignments)} assignments provided.")
            added = {len(current) + i: list(r) for i, r in enumerate(assignments)}
            validate_new_partitions_assignment(added, rf, live)
        if validate_only:
            return increment
        data["partitions"] = {str(p): r for p, r in {**current, **added}.items()}
        await self.store.set_json(paths.topic(name), data, version=stat.version)
        await self.sync_store()
        if timeout_ms > 0 and not await self.cache.wait_for(
            lambda s: (t := s.topics.get(name)) is not None and t.num_partitions == count
            and self.cache.has_leaders(name), timeout_ms
        ):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"topic '{name}' has {count} partitions but not all have leaders yet")
        if timeout_ms > 0:
            await self.sync_store()  # as create_topic: the new leaders' LeaderAndIsr waits for it
        return increment

    @_store_reached
    async def delete_topic(self, name: str, timeout_ms: int = 30_000) -> TopicInfo:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED)
        topic = self.cache.topic(name)
        # A forged UpdateMetadata can put any name in the cache; only legal ones are store paths.
        if (topic is None or not is_valid_topic_name(name)
                or await self.store.exists(paths.topic(name)) is None):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        with contextlib.suppress(NodeExistsError):  # already being deleted
            await self.store.create(paths.delete_topic(name))
        await self.sync_store()
        if timeout_ms > 0 and not await self.cache.wait_for(
            lambda snapshot: name not in snapshot.topics, timeout_ms
        ):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"topic '{name}' is not deleted yet")
        await self.sync_store()  # the controller's deletion of the topic's nodes too
        return topic

    # -- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------

    @_store_reached
    async def topic_config_overrides(self, name: str) -> dict[str, str]:
        """A topic's overrides as the store has them (the truth; metadata caches may lag)."""
        validate_topic_name(name)  # INVALID_TOPIC_EXCEPTION, as Kafka's config validation
        if await self.store.exists(paths.topic(name)) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            data, _ = await self.store.get_json(paths.topic_config(name))
        except NoNodeError:
            return {}
        return dict((data or {}).get("config", {}))

    @_store_reached
    async def alter_topic_configs(self, name: str, overrides: dict[str, str], *,
                                  validate_only: bool) -> None:
        """Replace a topic's overrides, validated as a whole. The controller watches the config node:
        it re-reads it and sends UpdateMetadata, and every broker applies the new LogConfig."""
        try:
            self.config.log_config(overrides)
        except KafkaError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource "
                             f"ConfigResource(type=TOPIC, name='{name}'): {exc.message}") from None
        if validate_only:
            return
        body = {"version": 1, "config": overrides}
        try:
            await self.store.set_json(paths.topic_config(name), body)
        except NoNodeError:
            await self.store.create_json(paths.topic_config(name), body)
        # Kafka's change notification: every broker re-reads the topic's node once.
        await self.store.create_json(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
                               notification_body(name), sequence=True, makepath=True)

    @_store_reached
    async def group_config_overrides(self, group_id: str) -> dict[str, str]:
        """A group's config overrides as the store has them."""
        try:
            data, _ = await self.store.get_json(group_configs.group_config_path(group_id))
        except NoNodeError:
            return {}
        return dict((data or {}).get("config", {}))

    @_store_reached
    async def alter_group_configs(self, group_id: str, overrides: dict[str, str], *,
                                  validate_only: bool) -> None:
        """Replace a group's overrides (validated as a whole); every broker reads them again
        after the change notification."""
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "Group id must not be empty")
        group_configs.validate(group_id, overrides)
        if validate_only:
            return
        path, body = group_configs.group_config_path(group_id), {"version": 1, "config": overrides}
        try:
            await self.store.set_json(path, body)
        except NoNodeError:
            await self.store.create_json(path, body, makepath=True)
        await self.store.create_json(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
                                     group_configs.notification_body(group_id), sequence=True,
                                     makepath=True)

    def _broker_entity(self, name: str) -> int | None:
        """The broker a BROKER resource names ("" : the cluster default, None)."""
        if not name:
            return None
        if not (name.isdigit() and int(name) in self.cache.snapshot.brokers):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown broker '{name}'")
        return int(name)

    @_store_reached
    async def broker_config_overrides(self, name: str) -> dict[str, str]:
        """A broker's (or, for "", the cluster default's) dynamic configs, as the store has them."""
        return await dynamic.read_entity(self.store, self._broker_entity(name))

    @_store_reached
    async def alter_broker_configs(self, name: str, configs: dict[str, str], *,
                                   validate_only: bool) -> None:
        """Replace a broker's (or the cluster default's) dynamic configs, validated as Kafka's
        DynamicBrokerConfig.validateConfigs: INVALID_REQUEST for a setting that cannot change
        live, or one only a single broker may be given; INVALID_CONFIG for a value a log setting
        does not take. Every broker reads them again after the change notification."""
        broker = self._broker_entity(name)
        fixed = sorted(k for k in configs if k not in dynamic.DYNAMIC)
        if fixed:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: "
                             f"Set({', '.join(fixed)})")
        per_broker = sorted(k for k in configs if k in dynamic.PER_BROKER_ONLY)
        if broker is None and per_broker:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default "
                             "cluster level, broker id must be specified: "
                             f"Set({', '.join(per_broker)})")
        try:
            self.config.log_config(dynamic.topic_defaults(configs))
        except (KafkaError, ValueError) as exc:
            message = exc.message if isinstance(exc, KafkaError) else str(exc)
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource "
                             f"ConfigResource(type=BROKER, name='{name}'): {message}") from None
        if validate_only:
            return
        path, body = dynamic.config_path(broker), {"version": 1, "config": configs}
        try:
            await self.store.set_json(path, body)
        except NoNodeError:
            await self.store.create_json(path, body, makepath=True)
        await self.store.create_json(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
                                     dynamic.notification_body(broker), sequence=True,
                                     makepath=True)

    # -- DescribeConfigs --------------------------------------------------------------------

    def topic_configs(self, name: str, dynamic: DynamicBrokerConfigs | None = None
                      ) -> list[ConfigEntry]:
        validate_topic_name(name)  # INVALID_TOPIC_EXCEPTION first, as Kafka's Topic.validate
        topic = self.cache.topic(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return topic_entries(self.config, topic.configs, dynamic)

    def broker_configs(self, dynamic: DynamicBrokerConfigs | None = None) -> list[ConfigEntry]:
        return broker_entries(self.config, dynamic)

    async def group_configs(self, group_id: str) -> list[ConfigEntry]:
        return group_entries(self.config, await self.group_config_overrides(group_id))
