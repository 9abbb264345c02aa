"""`kafka-sim topics / produce / consume / groups` through their console script against a real
broker: Kafka's output layouts, what they change in the cluster (checked with kafka-python), and
one-line errors with non-zero exit codes."""

from __future__ import annotations

import base64
import os
import re
import socket
import subprocess
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.console_tools import (
    KAFKA_SIM,
    ROOT,
    Tools,
    columns,
    kafka_sim,
    one_line_error,
)

NO_REBALANCE_DELAY = {"group.initial.rebalance.delay.ms": "0"}


def describe_lines(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """kafka-topics.sh --describe of one topic: its header's fields, each partition line's."""
    header, *partitions = text.rstrip("\n").split("\n")

    def fields(line: str) -> dict[str, str]:
        return dict(f.split(": ", 1) if ": " in f else (f.rstrip(":"), "")
                    for f in line.strip("\t").split("\t"))

    assert all(p.startswith("\tTopic: ") for p in partitions), text
    return fields(header), [fields(p) for p in partitions]


def test_topics_create_list_describe_alter_delete(broker_factory):
    cluster = broker_factory(brokers=3)
    tools = Tools(cluster.bootstrap)
    assert tools.ok("topics", "--create", "--topic", "orders", "--partitions", "2",
                    "--replication-factor", "3", "--config", "retention.ms=60000",
                    "--config", "cleanup.policy=compact") == "Created topic orders.\n"
    assert "orders" in tools.ok("topics", "--list").split("\n")

    header, partitions = describe_lines(tools.ok("topics", "--describe", "--topic", "orders"))
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    (meta,) = admin.describe_topics(["orders"])
    topic_id = base64.urlsafe_b64encode(uuid.UUID(meta["topic_id"]).bytes).decode().rstrip("=")
    assert header == {"Topic": "orders", "TopicId": topic_id, "PartitionCount": "2",
                      "ReplicationFactor": "3",
                      "Configs": "cleanup.policy=compact,retention.ms=60000"}
    by_index = {p["partition_index"]: p for p in meta["partitions"]}
    for line in partitions:
        p = by_index[int(line["Partition"])]
        assert line == {"Topic": "orders", "Partition": str(p["partition_index"]),
                        "Leader": str(p["leader_id"]),
                        "Replicas": ",".join(map(str, p["replica_nodes"])),
                        "Isr": ",".join(map(str, p["isr_nodes"]))}
        assert sorted(p["replica_nodes"]) == sorted(p["isr_nodes"]) == [0, 1, 2]
    assert len(partitions) == 2

    assert tools.ok("topics", "--alter", "--topic", "orders", "--partitions", "3") == ""
    header, partitions = describe_lines(tools.ok("topics", "--describe", "--topic", "ord.*"))
    assert header["PartitionCount"] == "3" and len(partitions) == 3
    assert tools.ok("topics", "--describe", "--under-replicated-partitions") == ""

    # Broker 2 stops: the controller takes it out of every ISR and the report shows the orders
    # partitions replicated to it, without their topic's line (as Kafka's), 2 listed offline.
    cluster.call(lambda: cluster.cluster.stop_broker(2))
    while any(2 in p["isr_nodes"] for p in admin.describe_topics(["orders"])[0]["partitions"]):
        time.sleep(0.05)  # the controller's ISR change reaches the metadata: nothing to await
    report = tools.ok("topics", "--describe", "--topic", "orders", "--under-replicated-partitions")
    assert [(f["Partition"], "2" in f["Isr"].split(","), f.get("Offline")) for f in
            (dict(x.split(": ") for x in line.strip("\t").split("\t")) for line in
             report.splitlines())] == [("0", False, "2"), ("1", False, "2"), ("2", False, "2")]
    assert tools.ok("topics", "--describe", "--unavailable-partitions") == ""
    cluster.call(lambda: cluster.cluster.start_broker(2))

    # A move under way (KIP-455): the replica joining cannot catch up while its replication is
    # paused, so the move stays in progress; the replication factor leaves out the leaving one.
    tools.ok("topics", "--create", "--topic", "moving", "--partitions", "1",
             "--replication-factor", "2")
    (replicas,) = [p["replica_nodes"] for p in admin.describe_topics(["moving"])[0]["partitions"]]
    (joining,) = {0, 1, 2} - set(replicas)
    cluster.call(lambda: cluster.cluster.pause_replication(joining))
    admin.alter_partition_reassignments({TopicPartition("moving", 0): [replicas[0], joining]})
    print(admin.list_partition_reassignments())
    header, (line,) = describe_lines(tools.ok("topics", "--describe", "--topic", "moving"))
    assert header["ReplicationFactor"] == "2"
    assert (line["Adding Replicas"], line["Removing Replicas"]) == (str(joining),
                                                                    str(replicas[1]))
    assert sorted(map(int, line["Replicas"].split(","))) == [0, 1, 2]
    cluster.call(lambda: cluster.cluster.resume_replication(joining))

    line = tools.fails("topics", "--create", "--topic", "orders")
    assert "TOPIC_ALREADY_EXISTS" in line and "'orders'" in line
    assert tools.ok("topics", "--create", "--topic", "orders", "--if-not-exists") == ""
    line = tools.fails("topics", "--alter", "--topic", "orders", "--partitions", "2")
    assert "INVALID_PARTITIONS" in line and "3 partitions" in line

    assert tools.ok("topics", "--delete", "--topic", "orders") == ""
    assert "orders" not in admin.list_topics()
    assert tools.fails("topics", "--describe", "--topic", "orders") == \
        "kafka-sim topics: topic 'orders' does not exist"
    admin.close()


def test_produce_then_consume_with_keys_headers_partitions_and_groups(broker_factory):
    cluster = broker_factory(NO_REBALANCE_DELAY)
    tools = Tools(cluster.bootstrap)
    tools.ok("topics", "--create", "--topic", "lines", "--partitions", "2")
    done = tools.run("produce", "--topic", "lines", "--partition", "0", "--property",
                     "parse.key=true", "--property", "key.separator=:", "--property",
                     "parse.headers=true", stdin="h1:v1,h2:v2\tk1:first\n\tk2:second\n")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")  # no progress on a pipe
    done = tools.run("produce", "--topic", "lines", "--partition", "1", "--acks", "1",
                     "--progress", stdin="third\n")
    assert done.returncode == 0 and done.stderr.splitlines()[-1].startswith("produced 1 records")

    reader = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                           auto_offset_reset="earliest")
    reader.assign([TopicPartition("lines", 0), TopicPartition("lines", 1)])
    sent = []
    while len(sent) < 3:
        sent += [(r.partition, r.offset, r.key, r.value, r.headers)
                 for records in reader.poll(timeout_ms=1000).values() for r in records]
    reader.close()
    sent.sort()
    assert sent == [(0, 0, b"k1", b"first", [("h1", b"v1"), ("h2", b"v2")]),
                    (0, 1, b"k2", b"second", []), (1, 0, None, b"third", [])]

    out = tools.ok("consume", "--topic", "lines", "--from-beginning", "--max-messages", "3",
                   "--property", "print.key=true", "--property", "print.headers=true",
                   "--property", "print.timestamp=true", "--property", "print.partition=true",
                   "--property", "print.offset=true")
    lines = sorted(out.splitlines(), key=lambda line: line.split("\t")[1:3])
    assert all(re.fullmatch(r"CreateTime:\d{13}", line.split("\t")[0]) for line in lines), out
    assert [line.split("\t", 1)[1] for line in lines] == [
        "Partition:0\tOffset:0\th1:v1,h2:v2\tk1\tfirst",
        "Partition:0\tOffset:1\tNO_HEADERS\tk2\tsecond",
        "Partition:1\tOffset:0\tNO_HEADERS\tnull\tthird"]
    assert tools.ok("consume", "--topic", "lines", "--partition", "0", "--offset", "1",
                    "--max-messages", "1") == "second\n"

    # A group commits what it printed: the next member of the group goes on from there.
    done = tools.run("consume", "--topic", "lines", "--group", "printers", "--from-beginning",
                     "--max-messages", "2", "--progress")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2, done
    assert done.stderr.splitlines()[-1].startswith("consumed 2 records"), done.stderr
    rest = tools.ok("consume", "--topic", "lines", "--group", "printers", "--max-messages", "1")
    assert sorted(done.stdout.splitlines() + rest.splitlines()) == ["first", "second", "third"]

    line = tools.fails("consume", "--topic", "nope", "--timeout-ms", "100")
    assert line == "kafka-sim consume: topic 'nope' does not exist"
    line = tools.fails("produce", "--topic", "lines", "--partition", "5", stdin="x\n")
    assert line == "kafka-sim produce: topic 'lines' has no partition 5 (it has 2)"
    line = tools.fails("produce", "--topic", "lines", "--property", "parse.key=true",
                       stdin="no separator\n")
    assert "no key separator found on line number 1" in line


def test_a_killed_consumer_commits_what_it_printed_and_leaves_its_group(broker_factory):
    cluster = broker_factory(NO_REBALANCE_DELAY)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    producer.send("tail", value=b"one").get(30)
    producer.close()
    consume = subprocess.Popen(
        [str(KAFKA_SIM), "consume", "--bootstrap-server", cluster.bootstrap, "--topic", "tail",
         "--group", "tailers", "--from-beginning"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert consume.stdout.readline() == "one\n"
        consume.terminate()
        out, err = consume.communicate(timeout=30)
    finally:
        consume.kill()
    assert (consume.returncode, out, err) == (0, "", "")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    (group,) = admin.describe_groups(["tailers"]).values()
    offsets = admin.list_group_offsets("tailers")["tailers"]
    admin.close()
    assert group["group_state"] == "Empty"  # it left at once, not after its session timeout
    assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 1}


def test_consume_read_committed_skips_aborted_transactions(kafka_broker):
    tools = Tools(kafka_broker.bootstrap)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, transactional_id="tx-1")
    producer.init_transactions()
    for value, commit in ((b"aborted", False), (b"committed", True), (b"later", True)):
        producer.begin_transaction()
        producer.send("ledger", value=value)
        producer.flush()  # written before the abort marker (an abort drops unsent records)
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()
    args = ("consume", "--topic", "ledger", "--from-beginning", "--max-messages", "2")
    assert tools.ok(*args) == "aborted\ncommitted\n"
    assert tools.ok(*args, "--isolation-level", "read_committed") == "committed\nlater\n"


def test_groups_describe_reset_and_delete(broker_factory):
    cluster = broker_factory(NO_REBALANCE_DELAY)
    tools = Tools(cluster.bootstrap)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    tools.ok("topics", "--create", "--topic", "jobs", "--partitions", "2")
    for i in range(5):
        producer.send("jobs", value=b"job %d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    member = KafkaConsumer("jobs", bootstrap_servers=cluster.bootstrap, group_id="workers",
                           client_id="worker-1", enable_auto_commit=False,
                           auto_offset_reset="earliest")
    seen = 0
    while seen < 5:
        seen += sum(len(r) for r in member.poll(timeout_ms=1000).values())
    member.commit()

    assert "workers" in tools.ok("groups", "--list").split("\n")
    rows = columns(tools.ok("groups", "--describe", "--group", "workers"))
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"])
            for r in rows] == [("jobs", "0", "3", "3", "0"), ("jobs", "1", "2", "2", "0")]
    assert all(r["GROUP"] == "workers" and r["CLIENT-ID"] == "worker-1" and r["HOST"] ==
               "/127.0.0.1" and r["CONSUMER-ID"].startswith("worker-1-") for r in rows), rows
    (state,) = columns(tools.ok("groups", "--describe", "--group", "workers", "--state"))
    assert (state["STATE"], state["#MEMBERS"], state["ASSIGNMENT-STRATEGY"]) == ("Stable", "1",
                                                                                "range")
    assert re.fullmatch(r"127\.0\.0\.1:\d+\(0\)", state["COORDINATOR"]), state
    (every,) = columns(tools.ok("groups", "--describe", "--all-groups", "--state"))
    assert every == state
    (members,) = columns(tools.ok("groups", "--describe", "--group", "workers", "--members"))
    assert (members["CLIENT-ID"], members["#PARTITIONS"]) == ("worker-1", "2")

    line = tools.fails("groups", "--reset-offsets", "--group", "workers", "--topic", "jobs",
                       "--to-earliest", "--execute")
    assert "inactive" in line and "Stable" in line
    member.close()  # leaves the group: now its offsets may be reset

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)

    def committed() -> dict[int, int]:
        offsets = admin.list_group_offsets("workers")["workers"]
        return {tp.partition: o.offset for tp, o in offsets.items()}

    done = tools.run("groups", "--reset-offsets", "--group", "workers", "--topic", "jobs:0",
                     "--shift-by", "-1")
    assert done.returncode == 0 and "dry run" in done.stderr
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in columns(done.stdout)] == [("0", "2")]
    assert committed() == {0: 3, 1: 2}  # a dry run changes nothing
    out = tools.ok("groups", "--reset-offsets", "--group", "workers", "--topic", "jobs",
                   "--to-earliest", "--execute")
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in columns(out)] == [("0", "0"), ("1", "0")]
    assert committed() == {0: 0, 1: 0}
    described = tools.ok("groups", "--describe", "--group", "workers")
    assert "Consumer group 'workers' has no active members." in described
    assert [(r["CURRENT-OFFSET"], r["LAG"], r["CONSUMER-ID"]) for r in columns(described)] == [
        ("0", "3", "-"), ("0", "2", "-")]
    done = tools.run("groups", "--reset-offsets", "--group", "workers", "--all-topics",
                     "--to-offset", "99", "--execute")
    assert committed() == {0: 3, 1: 2}  # clamped to the log end offsets, as Kafka's tool
    assert done.stderr.splitlines() == [
        "kafka-sim groups: offset 99 of jobs-0 is past its log end offset: 3 instead",
        "kafka-sim groups: offset 99 of jobs-1 is past its log end offset: 2 instead"]

    # The group keeps the offsets of a deleted topic: no log end offset, no lag.
    tools.ok("topics", "--delete", "--topic", "jobs")
    rows = columns(tools.ok("groups", "--describe", "--group", "workers"))
    assert [(r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows] == [
        ("3", "-", "-"), ("2", "-", "-")]
    admin.close()

    assert tools.ok("groups", "--delete", "--group", "workers") == \
        "Deletion of requested consumer groups ('workers') was successful.\n"
    assert "workers" not in tools.ok("groups", "--list").split("\n")
    assert tools.fails("groups", "--describe", "--group", "workers") == \
        "kafka-sim groups: consumer group 'workers' does not exist"
    line = tools.fails("groups", "--delete", "--group", "workers")
    assert "GROUP_ID_NOT_FOUND" in line


def test_errors_are_one_line_with_non_zero_exit_codes():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    for tool, args in (("topics", ["--list"]), ("consume", ["--topic", "t"])):
        line = one_line_error(kafka_sim(tool, "--bootstrap-server", closed,
                                        "--connect-timeout-ms", "300", *args), tool)
        assert line == f"kafka-sim {tool}: cannot reach a broker at {closed} (gave up after 300 ms)"
    assert "exactly one action" in one_line_error(kafka_sim("topics"), "topics", 2)
    assert "--describe needs --group" in one_line_error(
        kafka_sim("groups", "--describe"), "groups", 2)
    assert "print.key takes true or false" in one_line_error(
        kafka_sim("consume", "--topic", "t", "--property", "print.key=yes"), "consume", 2)
    assert "--offset needs --partition" in one_line_error(
        kafka_sim("consume", "--topic", "t", "--offset", "3"), "consume", 2)
