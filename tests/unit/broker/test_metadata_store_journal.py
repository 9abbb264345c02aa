"""The embedded store on disk: journal replay, torn tails, snapshot rollover, the format-1 file,
group commit and crash safety (a process killed after flush())."""

import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from broker.metadata.embedded_store import EmbeddedMetadataStore
from broker.metadata.store import MetadataStoreError
from storage.metadata_image import JOURNAL, SNAPSHOT
from storage.txn_log import parse_frames

ROOT = Path(__file__).resolve().parents[3]


async def fill(store: EmbeddedMetadataStore, n: int, prefix: str = "/t") -> None:
    await store.ensure_path(prefix)
    for i in range(n):
        await store.create_json(f"{prefix}/n{i}", {"i": i, "pad": "x" * 50})
        if i % 3 == 0:
            await store.set_json(f"{prefix}/n{i}", {"i": i, "set": True})
        if i % 7 == 0:
            await store.delete(f"{prefix}/n{i}")


async def test_the_journal_replays_to_the_same_tree(tmp_path):
    store = EmbeddedMetadataStore(tmp_path / "md")
    await fill(store, 200)
    with store.transaction() as t:
        t.create("/multi")
        t.set("/t/n1", b"raw")
    store.close()
    assert not (tmp_path / "md" / SNAPSHOT).exists()  # small: no snapshot yet
    assert EmbeddedMetadataStore(tmp_path / "md").dump() == store.dump()


async def test_a_failed_multi_op_writes_nothing(tmp_path):
    store = EmbeddedMetadataStore(tmp_path / "md")
    await store.create("/a")
    await store.flush()
    size = (tmp_path / "md" / JOURNAL).stat().st_size
    with pytest.raises(MetadataStoreError), store.transaction() as t:
        t.create("/b")
        t.delete("/missing")
    await store.flush()
    assert (tmp_path / "md" / JOURNAL).stat().st_size == size
    store.close()
    assert await EmbeddedMetadataStore(tmp_path / "md").get_children("/") == ["a"]


async def test_a_torn_tail_is_cut_with_a_warning_and_appends_continue_after_it(tmp_path):
    path = tmp_path / "md"
    store = EmbeddedMetadataStore(path)
    await store.create("/kept", b"1")
    await store.create("/torn", b"2")
    store.close()
    journal = path / JOURNAL
    records = parse_frames(journal.read_bytes())
    first = len(journal.read_bytes()) - len(records.payloads[-1]) - 8
    journal.write_bytes(journal.read_bytes()[:-5])  # a crash in the middle of the last append
    with capture_logs() as logs:
        reopened = EmbeddedMetadataStore(path)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "metadata journal had a torn tail (a crash during a write): dropped it"]
    assert await reopened.get_children("/") == ["kept"]
    assert journal.stat().st_size == first
    await reopened.create("/after")
    reopened.close()
    assert await EmbeddedMetadataStore(path).get_children("/") == ["after", "kept"]


async def test_the_snapshot_rolls_when_the_journal_outgrows_it(tmp_path):
    path = tmp_path / "md"
    store = EmbeddedMetadataStore(path, min_roll_bytes=4096)
    for batch in range(10):
        await fill(store, 50, prefix=f"/t{batch}")
        await store.flush()
    store.close()
    writer = store._writer
    assert writer is not None and writer.snapshots_written >= 2
    snapshot, journal = (path / SNAPSHOT).stat().st_size, (path / JOURNAL).stat().st_size
    # Every batch that takes the journal past the bound is followed by a roll.
    assert journal <= max(4096, snapshot) and snapshot > 4096
    assert EmbeddedMetadataStore(path).dump() == store.dump()


async def test_the_format_1_file_is_converted_once(tmp_path):
    legacy = tmp_path / "metadata-store.json"
    doc = {"format": 1, "zxid": 5, "last_session": 9, "nodes": {
        "/": {"data": "", "czxid": 0, "mzxid": 0, "pzxid": 4, "version": 0, "cversion": 2},
        "/brokers": {"data": "", "czxid": 1, "mzxid": 1, "pzxid": 1, "version": 0,
                     "cversion": 0},
        "/brokers/topics": {"data": "", "czxid": 2, "mzxid": 2, "pzxid": 3, "version": 0,
                            "cversion": 1},
        "/brokers/topics/t": {"data": base64.b64encode(b'{"partitions":{}}').decode(),
                              "czxid": 3, "mzxid": 5, "pzxid": 3, "version": 2,
                              "cversion": 0}}}
    legacy.write_text(json.dumps(doc))
    store = EmbeddedMetadataStore(tmp_path / "md", legacy_file=legacy)
    assert not legacy.exists() and (tmp_path / "md" / SNAPSHOT).exists()
    data, stat = await store.get_json("/brokers/topics/t")
    assert data == {"partitions": {}} and (stat.czxid, stat.mzxid, stat.version) == (3, 5, 2)
    assert store.create_session() == 10
    assert await store.create("/next") == "/next" and (await store.exists("/next")).czxid == 6
    store.close()
    assert EmbeddedMetadataStore(tmp_path / "md").dump() == store.dump()


def test_a_corrupt_format_1_file_is_reported_and_kept(tmp_path):
    legacy = tmp_path / "metadata-store.json"
    legacy.write_text("{not json")
    with pytest.raises(MetadataStoreError, match="corrupt metadata file .*metadata-store.json"):
        EmbeddedMetadataStore(tmp_path / "md", legacy_file=legacy)
    assert legacy.exists()


async def test_many_writes_share_few_fsyncs(tmp_path, monkeypatch):
    journal_syncs = []
    real_fsync = os.fsync

    def counting(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(JOURNAL):
            journal_syncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting)
    store = EmbeddedMetadataStore(tmp_path / "md")
    await fill(store, 1000)
    await store.flush()
    writes = len(parse_frames((tmp_path / "md" / JOURNAL).read_bytes()).payloads)
    assert writes > 1000 and 1 <= len(journal_syncs) < writes / 10
    store.close()


async def test_flush_returns_at_once_without_a_path_or_pending_writes(tmp_path):
    memory = EmbeddedMetadataStore(None)
    await memory.create("/a")
    await memory.flush()
    store = EmbeddedMetadataStore(tmp_path / "md")
    await store.flush()
    store.close()
    with pytest.raises(MetadataStoreError, match="closed"):
        await store.create("/late")


CRASHING_WRITER = textwrap.dedent("""
    import asyncio, os, signal, sys
    from broker.metadata.embedded_store import EmbeddedMetadataStore

    async def main():
        store = EmbeddedMetadataStore(sys.argv[1])
        for i in range(300):
            await store.create(f"/n{i:04d}", b"x" * 100)
            if i % 50 == 49:
                await store.flush()
        print("flushed", flush=True)
        for i in range(300, 2000):  # never flushed: may or may not reach the disk
            await store.create(f"/n{i:04d}", b"x" * 100)
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
""")


async def test_everything_flushed_survives_a_kill(tmp_path):
    path = tmp_path / "md"
    run = subprocess.run([sys.executable, "-c", CRASHING_WRITER, str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == -9 and run.stdout == "flushed\n", run.stderr
    store = EmbeddedMetadataStore(path)
    children = await store.get_children("/")
    assert len(children) >= 300
    assert children == [f"n{i:04d}" for i in range(len(children))]  # a prefix, in order
    store.close()


async def test_the_pipeline_reads_topic_configs_from_either_format(tmp_path):
    from pipeline.layout import compacted_topics, topic_configs

    broker_dir = tmp_path / "broker-0"
    broker_dir.mkdir()
    (broker_dir / "meta.properties").write_text("node.id=0\n")
    config = {"version": 1, "config": {"cleanup.policy": "compact"}}
    empty = {"data": "", "czxid": 1, "mzxid": 1, "pzxid": 1, "version": 0, "cversion": 1}
    legacy = {"format": 1, "zxid": 1, "last_session": 0, "nodes": {
        "/": empty, "/config": empty, "/config/topics": empty,
        "/config/topics/old": {"data": base64.b64encode(json.dumps(config).encode()).decode(),
                               "czxid": 1, "mzxid": 1, "pzxid": 1, "version": 0,
                               "cversion": 0}}}
    (tmp_path / "metadata-store.json").write_text(json.dumps(legacy))
    assert compacted_topics(broker_dir) == {"old"}
    store = EmbeddedMetadataStore(tmp_path / "metadata-store",
                                  legacy_file=tmp_path / "metadata-store.json")
    await store.create_json("/config/topics/new", {"version": 1, "config": {"retention.ms": "5"}})
    store.close()
    assert topic_configs(tmp_path) == topic_configs(broker_dir) == {
        "old": {"cleanup.policy": "compact"}, "new": {"retention.ms": "5"}}
