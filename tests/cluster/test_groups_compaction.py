"""Committed offsets after `__consumer_offsets` is compacted: the coordinator loads them back."""

from __future__ import annotations

import pytest

from broker.coordinator.group.group_metadata_manager import OFFSETS_TOPIC
from protocol import group_records as gr
from protocol.records import decode_batch, iter_batches
from tests.cluster.group_helpers import start_cluster
from tests.cluster.test_groups_offsets import simple_commit
from tests.harness import until
from tests.integration.raw_client import RawClient


def all_offsets_records(log_) -> list:
    """Every record of the offsets log, segment after segment, decoded with Kafka's schemas."""
    offset, out = log_.log_start_offset, []
    while offset < log_.log_end_offset:
        data = log_.read(offset, 1 << 20, max_offset=log_.log_end_offset).records
        for pos, header in iter_batches(data):
            out += [gr.decode_record(r.key, r.value) for r in decode_batch(data, pos)[1]]
            offset = header.next_offset
    return out


@pytest.fixture
async def cluster(tmp_path):
    cluster = await start_cluster(tmp_path)
    yield cluster
    await cluster.stop()


async def test_committed_offsets_load_after_offsets_topic_is_cleaned(cluster):
    broker = cluster.brokers[0]
    log_ = broker.replica_manager.partitions[(OFFSETS_TOPIC, 0)].log
    client = await RawClient.connect(broker.port)
    for i in range(40):
        assert await simple_commit(client, "g", {("t", 0): i, ("t", 1): 1000 + i}) == {
            ("t", 0): 0, ("t", 1): 0}
        if i % 5 == 4:
            log_.roll()
    await client.close()
    await until(lambda: log_.high_watermark == log_.log_end_offset)
    before = len(all_offsets_records(log_))
    assert broker.log_manager.clean_logs(force=True) >= 1
    after = all_offsets_records(log_)
    assert len(after) < before // 4
    keys = [(r.group, r.topic, r.partition) for r in after]
    assert keys.count(("g", "t", 0)) <= 2  # the latest below the active segment, and the active's

    coordinator = broker.group_coordinator
    coordinator.on_leadership(0, False)
    coordinator.on_leadership(0, True)  # read the compacted log again
    await until(lambda: coordinator.manager.owned == {0})
    fetched = coordinator.handle_fetch_offsets("g", [("t", 0), ("t", 1)])[1]
    assert (fetched[("t", 0)].offset, fetched[("t", 1)].offset) == (39, 1039)
