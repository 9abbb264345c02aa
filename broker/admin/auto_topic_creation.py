"""Topics created on a client's behalf, as Kafka's AutoTopicCreationManager does: a topic named in
Metadata (when `auto.create.topics.enable`) and the internal `__consumer_offsets` and
`__transaction_state`, created with their own partition count, replication factor and compacted
configs the first time a group or a transactional id needs them."""

from __future__ import annotations

from broker.admin.admin_manager import AdminManager
from broker.config import BrokerConfig
from broker.logs import get_logger
from broker.metadata.metadata_cache import MetadataCache
from broker.metadata.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from protocol.errors import KafkaError

log = get_logger("kafka_sim.auto_topic_creation")
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}


class AutoTopicCreationManager:
    def __init__(self, config: BrokerConfig, admin: AdminManager, cache: MetadataCache) -> None:
        self.config = config
        self.admin = admin
        self.cache = cache

    async def create_topic(self, name: str) -> None:
        """Write the topic to the metadata store (the controller elects its leaders); raises
        KafkaError, TOPIC_ALREADY_EXISTS included, as AdminManager does (not for the offsets topic,
        whose creation a client only triggers)."""
        if name == OFFSETS_TOPIC:
            await self.ensure_offsets_topic()
        elif name == TRANSACTION_STATE_TOPIC:
            await self.ensure_transaction_state_topic()
        else:
            await self.admin.create_topic_in_store(name)

    async def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` (internal, compacted) if it does not exist yet."""
        if self.cache.topic(OFFSETS_TOPIC) is not None:
            return
        try:
            await self._create_offsets_topic()
        except KafkaError as exc:  # TOPIC_ALREADY_EXISTS: someone else was first
            log.debug("offsets topic not created", reason=str(exc))

    async def _create_offsets_topic(self) -> None:
        # Capped at the live brokers so a 1-broker cluster works (Kafka would refuse instead).
        live = len(await self.admin.live_brokers())
        rf = max(1, min(self.config["offsets.topic.replication.factor"], live))
        partitions = self.config["offsets.topic.num.partitions"]
        await self.admin.create_topic_in_store(OFFSETS_TOPIC, partitions, rf,
                                               OFFSETS_TOPIC_CONFIGS, internal=True)
        log.info("created the offsets topic", partitions=partitions, replication_factor=rf)

    async def ensure_share_state_topic(self) -> None:
        """Create `__share_group_state` (internal, compacted, its own min.insync.replicas) if it
        does not exist yet."""
        await self._ensure_state_topic(SHARE_STATE_TOPIC, "share.coordinator.state.topic", {})

    async def ensure_transaction_state_topic(self) -> None:
        """Create `__transaction_state` (internal, compacted, its own min.insync.replicas and
        segment size) if it does not exist yet."""
        await self._ensure_state_topic(TRANSACTION_STATE_TOPIC, "transaction.state.log", {
            "segment.bytes": str(self.config["transaction.state.log.segment.bytes"])})

    async def _ensure_state_topic(self, name: str, prefix: str, configs: dict[str, str]) -> None:
        """A coordinator's topic, from its `<prefix>.replication.factor`, `.num.partitions` and
        `.min.isr` settings, capped at the live brokers as the offsets topic is."""
        if self.cache.topic(name) is not None:
            return
        live = len(await self.admin.live_brokers())
        rf = max(1, min(self.config[f"{prefix}.replication.factor"], live))
        partitions = self.config[f"{prefix}.num.partitions"]
        configs = {"cleanup.policy": "compact", **configs, "min.insync.replicas": str(
            max(1, min(self.config[f"{prefix}.min.isr"], rf)))}
        try:
            await self.admin.create_topic_in_store(name, partitions, rf, configs, internal=True)
        except KafkaError as exc:  # TOPIC_ALREADY_EXISTS: someone else was first
            log.debug("coordinator topic not created", topic=name, reason=str(exc))
            return
        log.info("created a coordinator's topic", topic=name, partitions=partitions,
                 replication_factor=rf)
