"""Transaction verification, the partition leader's side (KIP-890 part 1, Kafka's
AddPartitionsToTxnManager): before a transactional producer's first write to a partition in a
transaction, the leader asks the transaction's coordinator (AddPartitionsToTxn v4, verify_only)
whether the partition is in that producer's ongoing transaction. A batch that is not there (a
partition never added, another producer's id, a stale epoch) is refused, so no write can join a
transaction it is not part of, nor leave one hanging.

Transactions v2 (KIP-890 part 2, Produce v12): the leader asks the coordinator to add the
partition instead (the producer sends no AddPartitionsToTxn), and the same answers refuse a write
the coordinator cannot take (a stale epoch, a transaction still ending)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.metadata.coordinator_keys import java_string_hash, kafka_abs
from broker.metadata.topic_names import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode
from protocol.records import first_batch_header

if TYPE_CHECKING:
    from broker.coordinator.transaction.transaction_marker_channel import MarkerTransport
    from broker.metadata.metadata_cache import MetadataCache
    from broker.replication.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]
# What the coordinator (or reaching it) answers that the producer may retry: the produce says
# NOT_ENOUGH_REPLICAS, retriable, as Kafka's AddPartitionsToTxnManager
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.CONCURRENT_TRANSACTIONS})


def transactional_producers(entries: dict[TopicPartition, bytes | memoryview | None]
                            ) -> dict[TopicPartition, tuple[int, int]]:
    """The (producer id, epoch) of each partition whose first batch is transactional (Kafka looks
    at the first: one batch per partition is all Produce v3+ allows)."""
    found = {}
    for key, records in entries.items():
        header = first_batch_header(records)
        if header is not None and header.is_transactional:
            found[key] = (header.producer_id, header.producer_epoch)
    return found


async def verify_transactional_writes(
    replica_manager: ReplicaManager, cache: MetadataCache, transport: MarkerTransport,
    transactional_id: str, producers: dict[TopicPartition, tuple[int, int]], add: bool = False,
) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, tuple[int, object]]]:
    """The partitions refused, with the error the Produce answers for each, and those verified,
    with the producer id and guard their append must still hold (a marker for the producer
    arriving meanwhile voids it). A partition whose log has this producer's transaction open at
    this epoch already needs no question (Kafka's hasOngoingTransaction: at another epoch it is
    the last transaction, whose marker has not come yet); one not led here is left to the append
    (NOT_LEADER_OR_FOLLOWER)."""
    asking: dict[tuple[int, int], set[TopicPartition]] = {}
    for key, producer in producers.items():
        partition = replica_manager.partitions.get(key)
        if partition is None or not partition.is_leader:
            continue
        producer_state = partition.log.producer_state
        entry = producer_state.producers.get(producer[0])
        if producer[0] in producer_state.ongoing and entry is not None \
                and entry.producer_epoch == producer[1]:
            continue
        asking.setdefault(producer, set()).add(key)
    guards = {key: (producer[0], replica_manager.start_verification(key, producer[0]))
              for producer, keys in asking.items() for key in keys}
    refused: dict[TopicPartition, ErrorCode] = {}
    for (producer_id, epoch), keys in asking.items():
        answers = await _ask_coordinator(cache, transport, transactional_id, producer_id, epoch,
                                         keys, add)
        for key in keys:
            code = answers.get(key, ErrorCode.INVALID_TXN_STATE)
            if code in RETRIABLE:
                code = ErrorCode.NOT_ENOUGH_REPLICAS
            elif code == ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH  # what a Produce says of a stale epoch
            if code != ErrorCode.NONE:
                refused[key] = code
                replica_manager.end_verification(key, *guards.pop(key))
    return refused, guards


async def add_offsets_partition(cache: MetadataCache, transport: MarkerTransport,
                                transactional_id: str, producer_id: int, epoch: int,
                                key: TopicPartition) -> ErrorCode:
    """TxnOffsetCommit v5 (transactions v2): the group's `__consumer_offsets` partition joins the
    transaction, as AddOffsetsToTxn did; the error the commit answers (retriable ones as
    COORDINATOR_NOT_AVAILABLE, a stale epoch as INVALID_PRODUCER_EPOCH)."""
    answers = await _ask_coordinator(cache, transport, transactional_id, producer_id, epoch,
                                     {key}, True)
    code = answers.get(key, ErrorCode.INVALID_TXN_STATE)
    if code in RETRIABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code


async def _ask_coordinator(cache: MetadataCache, transport: MarkerTransport,
                           transactional_id: str, producer_id: int, epoch: int,
                           keys: set[TopicPartition], add: bool,
                           ) -> dict[TopicPartition, ErrorCode]:
    topic = cache.topic(TRANSACTION_STATE_TOPIC)
    if topic is None:
        return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    partition = kafka_abs(java_string_hash(transactional_id)) % topic.num_partitions
    state = cache.partition_state(TRANSACTION_STATE_TOPIC, partition)
    if state is None or state.leader < 0:
        return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        return await transport.verify_txn_partitions(
            state.leader, transactional_id, producer_id, epoch, keys, add=add)
    except ConnectionError:
        return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
