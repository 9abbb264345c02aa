"""A broker killed as a process is (KafkaServer.stop(crash=True)) and a ZooKeeper session that
expires (expire_session), on simulated time: the crashed broker's registration outlives it by the
session timeout, a start meanwhile is refused (having recovered the logs, not trusted them) and
leaves nothing half-started, and a cleanly stopped broker starts again at once."""

from __future__ import annotations

import asyncio

import pytest

from broker.config import build_config
from broker.metadata import zk_paths as paths
from broker.metadata.embedded_store import EmbeddedMetadataStore
from broker.metadata.store import NodeExistsError
from broker.server.cluster import Cluster
from broker.simulation.sim_loop import SimulatedLoop
from storage.naming import CLEAN_SHUTDOWN_FILE
from timer import VirtualClock


def on_simulated_time(tmp_path, scenario) -> None:
    loop = SimulatedLoop()

    async def main() -> None:
        clock = VirtualClock(lambda: int(loop.time() * 1000), lambda: int(loop.time() * 1000))
        config = build_config({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                               "control.listener": "", "zookeeper.session.timeout.ms": "6000"},
                              environ={})
        cluster = Cluster(config, 3, clock=clock, store=EmbeddedMetadataStore())
        cluster.context.inline_io = True
        await cluster.start()
        try:
            await scenario(cluster)
        finally:
            await cluster.stop()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_a_crashed_brokers_registration_lingers_for_the_session_timeout(tmp_path):
    async def scenario(cluster: Cluster) -> None:
        store = cluster.store
        await cluster.brokers[1].stop(crash=True)
        assert not (tmp_path / "broker-1" / CLEAN_SHUTDOWN_FILE).exists()
        assert await store.exists(paths.broker(1)) is not None  # ZooKeeper has not noticed yet
        with pytest.raises(NodeExistsError, match="has not yet timed out"):
            await cluster.start_broker(1)
        refused = cluster.brokers[1]
        assert not refused.running  # the refused start left nothing serving
        assert 1 not in cluster.context.running_brokers
        assert not refused.log_manager.had_clean_shutdown  # it recovered the crashed logs
        await asyncio.sleep(6.1)  # the session timeout, from the crash
        assert await store.exists(paths.broker(1)) is None
        await cluster.start_broker(1)
        assert cluster.brokers[1].running

    on_simulated_time(tmp_path, scenario)


def test_a_cleanly_stopped_broker_can_start_again_at_once(tmp_path):
    async def scenario(cluster: Cluster) -> None:
        await cluster.stop_broker(2)
        assert (tmp_path / "broker-2" / CLEAN_SHUTDOWN_FILE).exists()
        await cluster.start_broker(2)
        assert cluster.brokers[2].log_manager.had_clean_shutdown

    on_simulated_time(tmp_path, scenario)


def test_an_expired_session_moves_the_controller_and_the_broker_registers_again(tmp_path):
    async def scenario(cluster: Cluster) -> None:
        holder = next(b for b in cluster.brokers.values() if b.controller is not None)
        epoch = holder.controller.epoch
        await holder.expire_session()
        for _ in range(100):
            controller = cluster.active_controller()
            if controller is not None and controller.epoch > epoch and \
                    await cluster.store.exists(paths.broker(holder.broker_id)) is not None:
                break
            await asyncio.sleep(0.1)
        assert holder.controller is None or holder.controller.epoch > epoch
        assert cluster.active_controller().epoch > epoch
        assert await cluster.store.exists(paths.broker(holder.broker_id)) is not None

    on_simulated_time(tmp_path, scenario)
