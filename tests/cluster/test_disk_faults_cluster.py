"""A failing disk under real clients: a 3-broker cluster, RF=3, idempotent acks=all produce
(confluent-kafka, kafka-python) while the partition leader's log dir fails a write halfway (EIO:
the truncation back fails too, so torn bytes stay on its disk). The leader answers
KAFKA_STORAGE_ERROR, takes the dir offline and halts; leadership moves; every acknowledged record
is read back exactly once. Restarted, the old leader's recovery cuts the torn tail, it rejoins the
ISR and holds the same log. The README's disk-fault lines run as written."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from broker.control.control_client import ControlClient
from protocol.records import BATCH_LENGTH_OFFSET, LOG_OVERHEAD
from tests.cluster.client_producers import PRODUCERS, create_replicated_topic, produce_confluent
from tests.cluster.test_readme_ctl_block import DOCUMENT, KAFKA_SIM, SECTION
from tests.docs import section
from tests.harness import read_all

COUNT, FAIL_AT = 80, 40


def torn_bytes(segment: Path) -> int:
    """Bytes at the end of a segment file that are not a whole batch (by the batches' lengths)."""
    data, pos = segment.read_bytes(), 0
    while len(data) - pos >= LOG_OVERHEAD:
        size = int.from_bytes(data[pos + BATCH_LENGTH_OFFSET: pos + LOG_OVERHEAD], "big") \
            + LOG_OVERHEAD
        if pos + size > len(data):
            break
        pos += size
    return len(data) - pos


@pytest.mark.slow
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_a_leader_whose_disk_fails_halts_and_nothing_acknowledged_is_lost(broker_factory, client):
    cluster = broker_factory(brokers=3, control=True)
    control = ControlClient(cluster.control.url)
    topic = f"disk-fault-{client}"
    create_replicated_topic(cluster.bootstrap, topic)
    [before] = control.partitions(topic)
    old_leader = before["leader"]
    segment = cluster.log_dir(old_leader) / f"{topic}-0" / f"{0:020d}.log"

    def on_sent(i: int) -> None:
        if i == FAIL_AT:  # the next append writes 30 bytes of its batch, then fails
            fault = control.add_disk_fault(old_leader, "write", "EIO", after_bytes=30)
            assert fault["broker"] == old_leader and fault["errno"] == "EIO"

    acked = PRODUCERS[client](cluster.bootstrap, topic, on_sent, COUNT, idempotent=True)
    assert len(acked) == COUNT

    [fault] = control.disk_faults()
    assert fault["hits"] >= 1
    alive = {b["id"]: b["alive"] for b in control.brokers()}
    assert alive[old_leader] is False and sum(alive.values()) == 2  # it halted, alone
    [during] = control.partitions(topic)
    assert during["leader"] not in (-1, old_leader) and old_leader not in during["isr"]
    assert during["leader_epoch"] > before["leader_epoch"]
    assert read_all(cluster.bootstrap, topic) == acked  # each acknowledged record exactly once
    assert torn_bytes(segment) > 0  # the failed write's first part is still on the disk

    assert control.clear_disk_faults(broker=old_leader) == 1
    control.start_broker(old_leader)
    # Read on the cluster's loop: its appends run there, so a follower append the restarted broker
    # makes meanwhile is never seen half written (a read racing a write sees a partial batch).
    assert cluster.call(lambda: torn_bytes(segment)) == 0  # recovery at start cut it

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
    assert hw == COUNT

    def replica_bytes():
        return [b.replica_manager.partitions[(topic, 0)].log.read(0, 1 << 24, max_offset=hw).records
                for b in cluster.cluster.brokers.values()]

    logs = cluster.call(replica_bytes)
    assert logs[0] == logs[1] == logs[2] and logs[0]


def readme_disk_fault_block() -> list[tuple[str, list[str]]]:
    """The `sh` block of the control API document that arms disk faults."""
    blocks = re.findall(r"```sh\n(.*?)```", section(DOCUMENT, SECTION), re.S)
    found = [b for b in blocks if "disk-fault" in b]
    assert len(found) == 1, "the document should show the disk-fault commands in one block"
    return [(line, shlex.split(line, comments=True))
            for line in found[0].splitlines() if line.strip()]


def test_the_readme_disk_fault_lines_run_as_written(broker_factory, tmp_path):
    """Each line through the real `kafka-sim ctl`, against a cluster where broker 0 leads."""
    cluster = broker_factory(brokers=3, control=True)
    control = ControlClient(cluster.control.url)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic("greetings", -1, -1, replica_assignments={0: [0, 1, 2]})])
    admin.close()
    root = str(Path(__file__).resolve().parents[2])  # the code under test, also in a worktree
    env = {**os.environ, "KAFKA_SIM_CONTROL_URL": cluster.control.url,
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    [(add_line, add), (_, listing), (_, clear)] = readme_disk_fault_block()

    def ctl(argv: list[str]) -> str:
        done = subprocess.run([str(KAFKA_SIM), *argv[1:]], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
        return done.stdout

    assert add[2:4] == ["disk-fault", "add"] and "--broker" in add
    assert ctl(add) == ("disk fault 1 added: broker 0 write: ENOSPC after 100 bytes, "
                        "until cleared\n")
    # Each record is a batch of about 70 bytes: broker 0's second append is partial, it answers
    # KAFKA_STORAGE_ERROR and halts; the producer retries on the new leader.
    acked = produce_confluent(cluster.bootstrap, "greetings", lambda i: None, 3,
                              idempotent=True)
    assert len(acked) == 3 and not control.brokers()[0]["alive"]
    [row] = [line.split() for line in ctl(listing).splitlines()[1:]]
    assert row[:4] == ["1", "0", "write", "ENOSPC"] and row[4] == "0" and int(row[6]) >= 1
    assert ctl(clear) == "cleared 1 disk fault(s)\n"
    assert ctl(clear) == "cleared 0 disk fault(s)\n"
    control.start_broker(0)
    assert control.brokers()[0]["alive"]
    assert read_all(cluster.bootstrap, "greetings") == acked
