"""Several log dirs per broker (`log.dirs=a,b`): partitions spread over them, each dir with its own
checkpoints and clean-shutdown marker; one dir failing offlines only its partitions (the broker
keeps serving the rest, the controller moves their leadership); a restart recovers both dirs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.metadata import zk_paths as paths
from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import encode_batch
from storage.naming import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_protocol_edges import CREATE_TOPICS, PRODUCE, produce_body


def two_dirs(tmp_path: Path, overrides: dict[str, str] | None = None):
    return cluster_config(tmp_path / "a", {"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}",
                                           "log.cleaner.enable": "false", **(overrides or {})})


async def create(client: RawClient, name: str, partitions: int, rf: int,
                 assignment: list[list[int]] | None = None) -> None:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": rf}
    if assignment is not None:
        topic = {"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": [
            {"partition_index": i, "broker_ids": replicas} for i, replicas in enumerate(assignment)]}
    response = await client.request(CREATE_TOPICS, 7, {"topics": [topic]})
    assert response.topics[0].error_code == 0, response


async def produce(client: RawClient, topic: str, partition: int, i: int):
    batch = encode_batch([(b"k%d" % i, b"v%d" % i, [], 1_000 + i)])
    response = await client.request(PRODUCE, 9, produce_body({(topic, partition): batch}))
    return response.responses[0].partition_responses[0]


def dir_of(broker, topic: str, partition: int) -> str:
    return broker.replica_manager.partitions[(topic, partition)].log.log_dir


async def all_led(cluster: Cluster, topic: str, partitions: int) -> None:
    def led() -> bool:
        for p in range(partitions):
            state = cluster.active_controller().states.get((topic, p))
            broker = cluster.brokers[state.leader] if state and state.leader >= 0 else None
            part = broker.replica_manager.partitions.get((topic, p)) if broker else None
            if part is None or not part.is_leader:
                return False
        return True

    await until(lambda: cluster.active_controller() is not None and led())


async def test_new_partitions_spread_over_the_dirs_each_with_its_own_files(tmp_path: Path):
    cluster = Cluster(two_dirs(tmp_path), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        a, b = str(tmp_path / "a" / "broker-0"), str(tmp_path / "b" / "broker-0")
        assert list(broker.log_manager.dirs) == [a, b]
        client = await RawClient.connect(broker.port)
        await create(client, "s", 4, 1)
        await all_led(cluster, "s", 4)
        # The dir holding fewest logs takes the next one, the first listed on a tie.
        assert [dir_of(broker, "s", p) for p in range(4)] == [a, b, a, b]
        for p in range(4):
            assert (await produce(client, "s", p, p)).error_code == 0
        await client.close()
    finally:
        await cluster.stop()
    for d, partitions in ((a, [0, 2]), (b, [1, 3])):
        assert (Path(d) / "meta.properties").read_text().endswith("node.id=0\n")
        assert (Path(d) / CLEAN_SHUTDOWN_FILE).exists()
        rows = (Path(d) / RECOVERY_POINT_CHECKPOINT).read_text().splitlines()[2:]
        assert sorted(rows) == [f"s {p} 1" for p in partitions]
    # Restarted, each log is found in its own dir again.
    cluster = Cluster(two_dirs(tmp_path), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        assert {k: log.log_dir for k, log in broker.log_manager.all_logs().items()} == {
            ("s", 0): a, ("s", 1): b, ("s", 2): a, ("s", 3): b}
        assert all(log.log_end_offset == 1 for log in broker.log_manager.all_logs().values())
    finally:
        await cluster.stop()


async def test_a_failed_dir_offlines_only_its_partitions_and_leadership_moves(tmp_path: Path):
    cluster = Cluster(two_dirs(tmp_path), 2)
    await cluster.start()
    try:
        b0, b1 = cluster.brokers[0], cluster.brokers[1]
        client = await RawClient.connect(b0.port)
        # Broker 0's logs come in partition order: a holds 0 and 2, b holds 1 and 3; it leads
        # 0 (on a) and 3 (on b), follows 2 (on a) and 1 (on b).
        await create(client, "f", 4, 2, [[0, 1], [1, 0], [1, 0], [0, 1]])
        await all_led(cluster, "f", 4)
        failing = str(tmp_path / "a" / "broker-0")
        on_failing = [p for p in range(4) if dir_of(b0, "f", p) == failing]
        elsewhere = [p for p in range(4) if p not in on_failing]
        assert on_failing == [0, 2] and elsewhere == [1, 3]
        led_by_0 = {p for p in range(4) if b0.replica_manager.partitions[("f", p)].is_leader}
        assert led_by_0 == {0, 3}
        hit = 0
        halted = asyncio.get_running_loop().create_future()
        cluster.context.on_broker_halt = halted.set_result

        cluster.add_disk_fault(0, "write", "EIO", log_dir=failing)
        failed = await produce(client, "f", hit, 0)
        assert failed.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        # The broker stays up and serves its other dir's partitions it leads.
        for p in elsewhere:
            if p in led_by_0:
                assert (await produce(client, "f", p, 1)).error_code == 0
        # The controller learnt it (the sequence node is read and deleted), elected broker 1 for
        # the failed dir's partitions and took broker 0 out of their ISR.
        controller = cluster.active_controller()
        await until(lambda: all(controller.states[("f", p)].leader == 1
                                and 0 not in controller.states[("f", p)].isr for p in on_failing))
        assert cluster.store.get_children(paths.LOG_DIR_EVENTS) == []
        assert controller.offline_replicas[0] == {("f", p) for p in on_failing}
        assert b0.running and not halted.done()
        assert all(("f", p) in b0.replica_manager.offline_partitions for p in on_failing)
        c1 = await RawClient.connect(b1.port)
        await until(lambda: b1.replica_manager.partitions[("f", hit)].is_leader)
        assert (await produce(c1, "f", hit, 2)).error_code == 0
        # Broker 0 answers for its offline partitions with KAFKA_STORAGE_ERROR, not
        # NOT_LEADER_OR_FOLLOWER: hosted here, on a dir that failed (Kafka's HostedPartition.Offline).
        assert (await produce(client, "f", hit, 3)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        await client.close()
        await c1.close()

        # The last dir failing halts the broker, as with one dir.
        other = str(tmp_path / "b" / "broker-0")
        cluster.add_disk_fault(0, "write", "EIO", log_dir=other)
        client = await RawClient.connect(b0.port)
        [p] = [p for p in elsewhere if p in led_by_0]
        assert (await produce(client, "f", p, 4)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert await asyncio.wait_for(halted, 10) == 0
        await client.close()
        assert not (Path(failing) / CLEAN_SHUTDOWN_FILE).exists()

        # Cleared and restarted: both dirs recover, the replicas come back into the ISRs.
        assert cluster.clear_disk_faults(broker_id=0) == 2
        await cluster.start_broker(0)
        b0 = cluster.brokers[0]
        assert sorted(b0.log_manager.all_logs()) == [("f", p) for p in range(4)]
        await until(lambda: (c := cluster.active_controller()) is not None
                    and all(0 in c.states[("f", p)].isr for p in range(4)))
    finally:
        await cluster.stop()
