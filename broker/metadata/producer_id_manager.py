"""Producer ids for InitProducerId, handed out from blocks of 1000 claimed in the metadata store.

A broker claims the next block by a conditional update of `/latest_producer_id_block` (retried
when another broker won the race), so ids are unique across brokers and restarts.
"""

from __future__ import annotations

import asyncio

from broker.metadata import zk_paths as paths
from broker.metadata.store import (
    BadVersionError,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
)
from protocol.errors import ErrorCode, KafkaError

BLOCK_SIZE = 1000
LONG_MAX = 2**63 - 1


class ProducerIdManager:
    def __init__(self, store: MetadataStore, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self._next = 0
        self._block_end = -1  # inclusive; nothing claimed yet
        self._claiming = asyncio.Lock()  # one claim at a time: concurrent callers share it

    async def generate_producer_id(self) -> int:
        """The next id; KafkaError COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka's answer
        when no block is at hand) while the store cannot be reached for a new block."""
        while self._next > self._block_end:
            async with self._claiming:
                if self._next > self._block_end:
                    try:
                        await self._claim_block()
                    except MetadataStoreError as exc:
                        raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                         f"no producer id block at hand: {exc}") from None
        producer_id = self._next
        self._next += 1
        return producer_id

    async def _claim_block(self) -> None:
        """Claim the block after the last one claimed, retrying for as long as other brokers win
        the race (as Kafka's ZkProducerIdManager: each loss means another broker progressed);
        past Long.MAX_VALUE there is no block left (UNKNOWN_SERVER_ERROR, as Kafka's fatal
        "Have exhausted all producerIds")."""
        while True:
            try:
                current, stat = await self.store.get_json(paths.PRODUCER_ID_BLOCK)
                start, version = int(current["block_end"]) + 1, stat.version
            except NoNodeError:
                start, version = 0, None
            if start > LONG_MAX - BLOCK_SIZE + 1:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"Have exhausted all producerIds (the last block ends at "
                                 f"{start - 1})")
            # Kafka's ProducerIdBlockZNode: the bounds are strings (longs in JSON-safe form).
            block = {"version": 1, "broker": self.broker_id, "block_start": str(start),
                     "block_end": str(start + BLOCK_SIZE - 1)}
            try:
                if version is None:
                    await self.store.create_json(paths.PRODUCER_ID_BLOCK, block)
                else:
                    await self.store.set_json(paths.PRODUCER_ID_BLOCK, block, version=version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed this block first: the next one
            self._next, self._block_end = start, start + BLOCK_SIZE - 1
            return
