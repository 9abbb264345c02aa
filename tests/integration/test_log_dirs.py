"""Several log dirs per broker (`log.dirs=a,b`): partitions spread over them, each dir with its own
checkpoints and clean-shutdown marker; one dir failing offlines only its partitions (the broker
keeps serving the rest, the controller moves their leadership); a restart recovers both dirs."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from broker.metadata import zk_paths as paths
from broker.server.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import decode_batch, encode_batch, iter_batches
from storage.naming import CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from tests.harness import cluster_config, until
from tests.integration.raw_client import RawClient
from tests.integration.test_fetch_purgatory import fetch_body
from tests.integration.test_hostile_input import METADATA
from tests.integration.test_protocol_edges import CREATE_TOPICS, FETCH, PRODUCE, produce_body

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35


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
        for version in range(5):  # every version; an empty topic list asks for no partition
            described = await client.request(DESCRIBE_LOG_DIRS, version, {"topics": []})
            assert [(r.error_code, r.log_dir, list(r.topics)) for r in described.results] == [
                (0, os.path.abspath(a), []), (0, os.path.abspath(b), [])]
            named = await client.request(DESCRIBE_LOG_DIRS, version, {"topics": [
                {"topic": "s", "partitions": [1, 2]}]})
            assert [[(t.name, [p.partition_index for p in t.partitions]) for t in r.topics]
                    for r in named.results] == [[("s", [2])], [("s", [1])]]
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
        assert await cluster.store.get_children(paths.LOG_DIR_EVENTS) == []
        assert controller.offline_replicas[0] == {("f", p) for p in on_failing}
        assert b0.running and not halted.done()
        assert all(("f", p) in b0.replica_manager.offline_partitions for p in on_failing)
        c1 = await RawClient.connect(b1.port)
        await until(lambda: b1.replica_manager.partitions[("f", hit)].is_leader)
        # Metadata names broker 0's replicas on the failed dir offline (UpdateMetadata carried it).
        await until(lambda: len(b1.metadata_cache.snapshot.offline_replicas) == 2)
        response = await c1.request(METADATA, 12, {
            "topics": [{"name": "f", "topic_id": bytes(16)}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        assert {p.partition_index: list(p.offline_replicas)
                for p in response.topics[0].partitions} == {0: [0], 1: [], 2: [0], 3: []}
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



async def alter_dir(client: RawClient, path: str, topic: str, partitions: list[int]) -> dict:
    response = await client.request(ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
        {"path": path, "topics": [{"name": topic, "partitions": partitions}]}]})
    return {(t.topic_name, p.partition_index): p.error_code
            for t in response.results for p in t.partitions}


async def read_back(client: RawClient, topic: str, end: int) -> list[tuple[int, bytes]]:
    """(offset, key) of every record up to `end`, fetched from offset 0."""
    out: list[tuple[int, bytes]] = []
    while not out or out[-1][0] < end - 1:
        response = await client.request(FETCH, 12, fetch_body(topic, len(out) and out[-1][0] + 1, 0))
        data = response.responses[0].partitions[0].records
        got = [(r.offset, r.key) for pos, _ in iter_batches(data) for r in decode_batch(data, pos)[1]]
        assert got, out[-1:]
        out += got
    return out


async def test_a_replica_moves_to_the_other_dir_under_a_live_producer(tmp_path: Path):
    cluster = Cluster(two_dirs(tmp_path), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        client = await RawClient.connect(broker.port)
        response = await client.request(CREATE_TOPICS, 7, {"topics": [
            {"name": "mv", "num_partitions": 1, "replication_factor": 1,
             "configs": [{"name": "segment.bytes", "value": "65536"}]}]})
        assert response.topics[0].error_code == 0
        await all_led(cluster, "mv", 1)
        a, b = (str(tmp_path / d / "broker-0") for d in "ab")
        assert dir_of(broker, "mv", 0) == a
        acked: list[tuple[int, bytes]] = []
        value = b"x" * 4000  # 16 batches a segment; copy chunks above the off-loop bound

        async def produce_all(n: int, until: asyncio.Event | None = None) -> None:
            """n records, and more until `until` is set and 100 after it: the swap happens
            under the producer however long the copy takes."""
            i, after = 0, 0
            while i < n or (until is not None and after < 100):
                after += until is not None and until.is_set()
                batch = encode_batch([(b"k%d" % i, value, [], 1_000 + i)])
                response = await client.request(PRODUCE, 9, produce_body({("mv", 0): batch}, -1))
                answer = response.responses[0].partition_responses[0]
                assert answer.error_code == 0, answer
                acked.append((answer.base_offset, b"k%d" % i))
                i += 1

        await produce_all(200)
        movers = broker.replica_manager.alter_log_dirs
        other = await RawClient.connect(broker.port)
        swapped = movers.swapped.setdefault(("mv", 0), asyncio.Event())  # the move's own
        producing = asyncio.create_task(produce_all(300, until=swapped))
        assert await alter_dir(other, os.path.abspath(b), "mv", [0]) == {("mv", 0): 0}
        future = broker.log_manager.get_future_log("mv", 0)
        assert future is not None and future.log_dir == b
        assert future.directory.name.startswith("mv-0.") and future.directory.name.endswith("-future")
        described = await other.request(DESCRIBE_LOG_DIRS, 4, {"topics": None})
        futures = [(r.log_dir, p.is_future_key) for r in described.results for t in r.topics
                   for p in t.partitions]
        assert sorted(futures) == [(os.path.abspath(a), False), (os.path.abspath(b), True)]
        await asyncio.wait_for(swapped.wait(), 30)
        assert not producing.done()  # the swap happened while the producer went on
        await producing
        assert dir_of(broker, "mv", 0) == b and not (Path(a) / "mv-0").exists()
        assert len(list(Path(b).glob("mv-0/*.log"))) > 5  # the segments came along
        # Every acknowledged record, once, at its offset; nothing else.
        assert await read_back(other, "mv", len(acked)) == [
            (offset, key) for offset, key in sorted(acked)] == [
            (n, b"k%d" % (n if n < 200 else n - 200)) for n in range(len(acked))]
        await client.close()
        await other.close()
    finally:
        await cluster.stop()
    cluster = Cluster(two_dirs(tmp_path), 1)  # and it is found there after a restart
    await cluster.start()
    try:
        log = cluster.brokers[0].log_manager.get_log("mv", 0)
        assert log.log_dir == b and log.log_end_offset == len(acked)
    finally:
        await cluster.stop()


async def test_a_move_interrupted_by_a_restart_goes_on_and_a_half_done_swap_is_finished(tmp_path):
    cluster = Cluster(two_dirs(tmp_path), 1)
    await cluster.start()
    a, b = (str(tmp_path / d / "broker-0") for d in "ab")
    try:
        broker = cluster.brokers[0]
        client = await RawClient.connect(broker.port)
        await create(client, "r", 2, 1)
        await all_led(cluster, "r", 2)
        for i in range(10):
            assert (await produce(client, "r", 0, i)).error_code == 0
            assert (await produce(client, "r", 1, i)).error_code == 0
        await client.close()
        # A move begun but not copied yet when the broker stops (no copier: as if it had not run).
        broker.log_manager.create_future_log("r", 0, b)
    finally:
        await cluster.stop()
    [future] = Path(b).glob("r-0.*-future")
    cluster = Cluster(two_dirs(tmp_path), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        assert broker.log_manager.get_future_log("r", 0) is not None  # loaded as a future log
        await all_led(cluster, "r", 2)
        await asyncio.wait_for(broker.replica_manager.alter_log_dirs.swapped[("r", 0)].wait(), 30)
        assert dir_of(broker, "r", 0) == b and not future.exists()
        assert broker.log_manager.get_log("r", 0).log_end_offset == 10
    finally:
        await cluster.stop()
    # A crash between the swap's two renames: the current folder is already `-delete`, the future
    # one not yet renamed. The next start finishes it: the future log is the log.
    current = Path(b) / "r-1"  # r-1 moving back from b to a
    doomed = current.with_name(f"r-1.{'0' * 32}-delete")
    half = Path(a) / f"r-1.{'1' * 32}-future"
    shutil.copytree(current, half)
    current.rename(doomed)
    (Path(a) / HIGH_WATERMARK_CHECKPOINT).write_text("0\n1\nr 1 10\n")  # the copy's, as written
    cluster = Cluster(two_dirs(tmp_path), 1)
    await cluster.start()
    try:
        broker = cluster.brokers[0]
        log = broker.log_manager.get_log("r", 1)
        assert (log.log_dir, log.log_end_offset, log.high_watermark) == (a, 10, 10)
        assert broker.log_manager.get_future_log("r", 1) is None
        assert not doomed.exists() and not half.exists() and (Path(a) / "r-1").is_dir()
    finally:
        await cluster.stop()


async def test_a_disk_fault_names_one_of_the_brokers_dirs_or_none(tmp_path: Path):
    b = str(tmp_path / "b" / "broker-0")
    async with Cluster(two_dirs(tmp_path), 1) as cluster:
        fault = cluster.add_disk_fault(0, "fsync", "EIO", log_dir=b)
        assert fault["log_dir"] == b and cluster.disk_faults() == [fault]
        assert "log_dir" not in cluster.add_disk_fault(0, "write", "EIO")  # every dir
        with pytest.raises(ValueError, match="is not one of the broker's log.dirs"):
            cluster.add_disk_fault(0, "write", "EIO", log_dir=str(tmp_path / "c"))
        assert cluster.clear_disk_faults() == 2


async def test_a_move_sent_elsewhere_midway_starts_over_there(tmp_path: Path):
    dirs = [tmp_path / d for d in "abc"]
    config = cluster_config(dirs[0], {"log.dirs": ",".join(map(str, dirs))})
    async with Cluster(config, 1) as cluster:
        broker = cluster.brokers[0]
        client = await RawClient.connect(broker.port)
        await create(client, "m", 1, 1)
        await all_led(cluster, "m", 1)
        for i in range(50):
            assert (await produce(client, "m", 0, i)).error_code == 0
        a, b, c = (os.path.abspath(d / "broker-0") for d in dirs)
        movers = broker.replica_manager.alter_log_dirs
        assert movers.alter(("m", 0), b) == ErrorCode.NONE
        first = broker.log_manager.get_future_log("m", 0)
        assert movers.alter(("m", 0), c) == ErrorCode.NONE  # before the first copier ran
        assert first.deleted and not first.directory.exists()
        await asyncio.wait_for(movers.swapped[("m", 0)].wait(), 30)
        assert dir_of(broker, "m", 0) == c and broker.log_manager.get_log("m", 0).log_end_offset == 50
        await asyncio.to_thread(broker.log_manager.flusher.drain)  # old copies are removed there
        assert not [p for d in (a, b, c) for p in Path(d).iterdir() if p.name.startswith("m-0.")]
        assert broker.log_dir_failure_channel.offline_log_dirs() == []
        await client.close()


async def test_a_dir_failing_at_start_leaves_the_broker_serving_the_other(tmp_path: Path):
    """A dir that failed (no clean-shutdown marker there) and still fails its recovery's fsyncs at
    the next start: the broker starts on the other dir, the failed dir's partitions are offline
    (never created afresh elsewhere); once the disk is fine, a restart brings them back."""
    a, b = (str(tmp_path / d / "broker-0") for d in "ab")
    async with Cluster(two_dirs(tmp_path), 1) as cluster:
        broker = cluster.brokers[0]
        client = await RawClient.connect(broker.port)
        await create(client, "d", 2, 1)
        await all_led(cluster, "d", 2)
        assert [dir_of(broker, "d", p) for p in range(2)] == [a, b]
        for p in range(2):
            assert (await produce(client, "d", p, p)).error_code == 0
        cluster.add_disk_fault(0, "write", "EIO", after_bytes=20, log_dir=b)
        assert (await produce(client, "d", 1, 2)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        await until(lambda: ("d", 1) in broker.replica_manager.offline_partitions)
        await client.close()
        await cluster.stop_broker(0)
        assert (Path(a) / CLEAN_SHUTDOWN_FILE).exists() and not (Path(b) / CLEAN_SHUTDOWN_FILE).exists()

        cluster.add_disk_fault(0, "fsync", "EIO", log_dir=b)
        await cluster.start_broker(0)  # b's recovery cuts the torn tail; its fsync fails
        broker = cluster.brokers[0]
        assert broker.running and [d.name for d in broker.log_manager.online_dirs()] == [a]
        assert ("d", 1) in broker.replica_manager.offline_partitions
        await until(lambda: (p := broker.replica_manager.partitions.get(("d", 0))) is not None
                    and p.is_leader)
        client = await RawClient.connect(broker.port)
        assert (await produce(client, "d", 0, 3)).base_offset == 1
        assert (await produce(client, "d", 1, 3)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert not (Path(a) / "d-1").exists()  # not made afresh in the healthy dir
        await client.close()

        assert cluster.clear_disk_faults(broker_id=0) == 2
        await cluster.stop_broker(0)
        await cluster.start_broker(0)
        broker = cluster.brokers[0]
        await all_led(cluster, "d", 2)
        assert dir_of(broker, "d", 1) == b
        client = await RawClient.connect(broker.port)
        assert (await produce(client, "d", 1, 4)).base_offset == 1  # after its one record
        await client.close()
