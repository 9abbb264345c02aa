"""Leader failover under real clients: a 3-broker cluster, RF=3, acks=all; the partition leader
is stopped (through the control API) in the middle of a stream of produces. Every acknowledged
record is readable afterwards, in order, from the new leader; the old leader comes back,
truncates, catches up and rejoins the ISR, and all replicas hold the same bytes up to the HW."""

from __future__ import annotations

import asyncio

import pytest

from broker.control.control_client import ControlClient
from tests.cluster.client_producers import PRODUCERS, create_replicated_topic
from tests.harness import read_all

COUNT, FAIL_AT = 120, 60


@pytest.mark.slow
@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_producers_keep_going_through_a_leader_failover(broker_factory, client):
    cluster = broker_factory(brokers=3, control=True)
    control = ControlClient(cluster.control.url)
    topic = f"failover-{client}"
    create_replicated_topic(cluster.bootstrap, topic)
    [before] = control.partitions(topic)
    old_leader = before["leader"]

    def on_sent(i: int) -> None:
        if i == FAIL_AT:
            control.stop_broker(old_leader)

    acked = PRODUCERS[client](cluster.bootstrap, topic, on_sent, COUNT, idempotent=False)
    assert len(acked) == COUNT

    [during] = control.partitions(topic)
    assert during["leader"] not in (-1, old_leader)
    assert during["leader_epoch"] > before["leader_epoch"]
    stored = read_all(cluster.bootstrap, topic)
    first_seen = list(dict.fromkeys(stored))  # a retried batch may be stored twice (no idempotence)
    assert first_seen == acked

    control.start_broker(old_leader)

    async def rejoined() -> None:  # runs on the cluster's own loop
        while True:
            [state] = await cluster.cluster.partitions(topic)
            leos = {r["log_end_offset"] for r in state["replicas_state"]}
            if len(state["isr"]) == 3 and len(leos) == 1:
                return
            await asyncio.sleep(0.02)  # followers fetch on real time here: look again shortly

    cluster.call(lambda: asyncio.wait_for(rejoined(), 30))
    [after] = control.partitions(topic)
    hw = next(r["high_watermark"] for r in after["replicas_state"] if r["broker"] == after["leader"])

    def replica_bytes():
        return [b.replica_manager.partitions[(topic, 0)].log.read(0, 1 << 24, max_offset=hw).records
                for b in cluster.cluster.brokers.values()]

    logs = cluster.call(replica_bytes)
    assert logs[0] == logs[1] == logs[2] and logs[0]
