"""DelayedFetch's cases over real logs: positions compared instead of bytes read (case G), a
segment rolled or truncated under the fetch offset (case F), a moved leader epoch (case E), a
partition gone (cases A and B), and a follower's check stopping at the first partition with data."""

from __future__ import annotations

import asyncio

import pytest

from broker.replication.delayed_fetch import DelayedFetch, FetchParams, FetchPartition
from broker.replication.partition import Partition, ReplicaState
from protocol.errors import ErrorCode, KafkaError
from protocol.records import encode_batch
from storage.log import Log
from storage.log_config import LogConfig

FOLLOWER = 1


class Replicas:
    """The partitions led here, looked up as the replica manager does."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.looked_up: list[int] = []

    def hosted_partition(self, topic: str, index: int) -> Partition:
        self.looked_up.append(index)
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition

    def partition_with_epoch(self, topic: str, index: int, current_leader_epoch: int, *,
                             require_leader: bool = True) -> Partition:
        partition = self.hosted_partition(topic, index)
        if current_leader_epoch >= 0 and current_leader_epoch != partition.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        if require_leader and not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition


@pytest.fixture
def replicas() -> Replicas:
    return Replicas()


def lead(replicas: Replicas, tmp_path, index: int) -> Partition:
    log = Log.open(tmp_path / f"t-{index}", LogConfig(), now_ms=lambda: 1_000)
    partition = Partition("t", index, log, 0, lambda: 1_000, lambda p, isr: None, leader_id=0,
                          leader_epoch=3, replicas=[0, FOLLOWER], isr=[0, FOLLOWER],
                          remote_replicas={FOLLOWER: ReplicaState()})
    replicas.partitions[("t", index)] = partition
    return partition


def append(partition: Partition, value_bytes: int) -> int:
    """Appends one record and moves the high watermark over it; the batch's size."""
    batch = encode_batch([(None, b"v" * value_bytes, [], 1_000)])
    partition.log.append_as_leader(batch, partition.leader_epoch)
    partition.log.high_watermark = partition.log_end_offset
    return len(batch)


def parked(replicas: Replicas, partitions: list[FetchPartition], *, min_bytes: int,
           replica_id: int = -1) -> DelayedFetch:
    return DelayedFetch(FetchParams(replica_id, 500, min_bytes, 1 << 20), partitions,
                        replicas=replicas, read=lambda params, parts: [],
                        future=asyncio.get_running_loop().create_future())


async def test_min_bytes_adds_up_the_positions_of_every_partition(replicas, tmp_path):
    p0, p1 = lead(replicas, tmp_path, 0), lead(replicas, tmp_path, 1)
    op = parked(replicas, [FetchPartition("t", 0, 0, 1 << 20), FetchPartition("t", 1, 0, 1 << 20)],
                min_bytes=1_000)
    assert op.try_complete() is False  # nothing yet: both at the high watermark
    size = append(p0, 500)
    assert op.try_complete() is False  # one batch: below min_bytes
    assert size + append(p1, 1_000 - size) >= 1_000
    assert op.try_complete() is True


async def test_a_partition_max_bytes_caps_what_a_partition_counts(replicas, tmp_path):
    p0 = lead(replicas, tmp_path, 0)
    op = parked(replicas, [FetchPartition("t", 0, 0, 100)], min_bytes=200)
    append(p0, 1_000)
    assert op.try_complete() is False  # 100 of the batch's bytes count: as Kafka's min()


async def test_a_consumer_waits_below_the_high_watermark_and_not_beyond(replicas, tmp_path):
    p0 = lead(replicas, tmp_path, 0)
    append(p0, 10)
    p0.log.high_watermark = 0  # the follower has not fetched it yet
    consumer = parked(replicas, [FetchPartition("t", 0, 0, 1 << 20)], min_bytes=1)
    follower = parked(replicas, [FetchPartition("t", 0, 0, 1 << 20)], min_bytes=1,
                      replica_id=FOLLOWER)
    assert consumer.try_complete() is False
    assert follower.try_complete() is True  # a follower reads to the log end offset
    p0.log.high_watermark = 1
    assert consumer.try_complete() is True


async def test_a_rolled_segment_completes_a_consumer_fetch_at_once(replicas, tmp_path):
    """Case F: the fetch offset's segment is no longer the one holding the high watermark."""
    p0 = lead(replicas, tmp_path, 0)
    append(p0, 10)
    op = parked(replicas, [FetchPartition("t", 0, 1, 1 << 20)], min_bytes=1 << 20)
    assert op.try_complete() is False
    p0.log.roll()
    append(p0, 10)
    assert op.try_complete() is True


async def test_a_log_truncated_under_the_fetch_offset_completes_it(replicas, tmp_path):
    p0 = lead(replicas, tmp_path, 0)
    append(p0, 10)
    p0.log.roll()
    append(p0, 10)
    op = parked(replicas, [FetchPartition("t", 0, 2, 1 << 20)], min_bytes=1 << 20,
                replica_id=FOLLOWER)
    assert op.try_complete() is False
    p0.log.truncate_to(1)  # an unclean election's new leader: its log ends on an older segment
    assert op.try_complete() is True


@pytest.mark.parametrize("change", ["epoch", "leader", "gone", "reassigned"])
async def test_a_partition_that_changed_under_the_fetch_completes_it(replicas, tmp_path, change):
    p0 = lead(replicas, tmp_path, 0)
    op = parked(replicas, [FetchPartition("t", 0, 0, 1 << 20, current_leader_epoch=3)],
                min_bytes=1, replica_id=FOLLOWER)
    assert op.try_complete() is False
    if change == "epoch":  # case E
        p0.leader_epoch = 4
    elif change == "leader":  # case A
        p0.leader_id = 2
    elif change == "gone":  # case B
        del replicas.partitions[("t", 0)]
    else:  # case A: the follower is no longer a replica
        del p0.remote_replicas[FOLLOWER]
    assert op.try_complete() is True


async def test_a_follower_fetch_stops_checking_at_the_first_partition_with_data(replicas, tmp_path):
    partitions = [lead(replicas, tmp_path, p) for p in range(50)]
    append(partitions[3], 10)
    op = parked(replicas, [FetchPartition("t", p, 0, 1024) for p in range(50)], min_bytes=1,
                replica_id=FOLLOWER)
    assert op.try_complete() is True
    assert replicas.looked_up == [0, 1, 2, 3]


async def test_min_bytes_zero_completes_at_once(replicas, tmp_path):
    lead(replicas, tmp_path, 0)
    assert parked(replicas, [FetchPartition("t", 0, 0, 1024)], min_bytes=0).try_complete() is True
