"""The web console in a real headless chromium, driven over the DevTools protocol, on a 3-broker
cluster with a topic, a consumer group, a share group and a transaction: every page draws the
cluster's data (a share consumer's records in flight among them), a
partition's log end offset moves on screen while a producer runs, and the stop button stops the
leader (leadership moves). Each page's screenshot is kept under build/screenshots/."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer

from broker.control.control_client import ControlClient
from tests.browser import Browser
from tests.cluster.client_producers import create_replicated_topic
from tests.integration.test_share_groups import poll_some, read_from_earliest, share_consumer

OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
             "group.initial.rebalance.delay.ms": "0"}
KEPT_SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"


def commit_a_transaction(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "console-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("shown", b"in a transaction")
    producer.commit_transaction(30)


def join_a_group(bootstrap: str) -> KafkaConsumer:
    """A member of group `watchers` that read `shown` and committed (left open: Stable)."""
    consumer = KafkaConsumer("shown", bootstrap_servers=bootstrap, group_id="watchers",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    read = 0
    for _ in range(50):
        read += sum(len(batch) for batch in consumer.poll(200).values())
        if read >= 5:
            break
    consumer.commit()
    return consumer


class BackgroundProducer:
    """kafka-python sending to `shown` until stopped, each record acknowledged by the ISR."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        self.stopped = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.producer.send("shown", b"live %d" % self.sent).get(timeout=30)
            self.sent += 1

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(30)
        self.producer.close()


def leader_replica(partition: str) -> str:
    """JS: the leader's replica bar element of a partition row on the partitions page."""
    row = f'tr[data-topic="shown"][data-partition="{partition}"]'
    return (f'document.querySelector(\'{row} .replica[data-broker="\' + '
            f'document.querySelector(\'{row}\').dataset.leader + \'"]\')')


@pytest.mark.slow
async def test_console_pages_live_updates_and_stop_button(broker_factory, tmp_path: Path):
    cluster = broker_factory(OVERRIDES, brokers=3, control=True)
    control = ControlClient(cluster.control.url)
    create_replicated_topic(cluster.bootstrap, "shown")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(5):
        producer.send("shown", b"%d" % i)
    producer.close()
    commit_a_transaction(cluster.bootstrap)
    consumer = join_a_group(cluster.bootstrap)
    read_from_earliest(cluster.bootstrap, "sharers")
    sharer = share_consumer(cluster.bootstrap, "sharers", "shown")
    held = poll_some(sharer)  # acquired, not acknowledged: in flight under its lock
    console = cluster.control.console_url
    shots = tmp_path / "screenshots"
    shots.mkdir()

    async def show(page: str, ready: str) -> dict:
        """Open a page, await `ready` (JS) in it, save its screenshot; the page's snapshot."""
        await browser.navigate(console + page)
        await browser.wait_for(ready)
        await browser.screenshot(shots / f"{page or 'cluster'}.png")
        return json.loads(await browser.evaluate(
            "document.getElementById('snapshot').textContent"))

    try:
        async with Browser(tmp_path / "chromium") as browser:
            # Each page draws what the cluster holds.
            snap = await show("", "document.querySelectorAll('tr[data-broker]').length === 3")
            controller = next(b["id"] for b in snap["brokers"] if b["controller"])
            assert await browser.evaluate(
                "document.querySelector('[data-card=controller] .value').textContent"
            ) == f"broker {controller}"
            assert await browser.evaluate(
                "document.querySelector('[data-card=alive] .value').textContent") == "3 / 3"
            loop_lag = await browser.evaluate(
                "document.querySelector('[data-card=loop-lag] .value').textContent")
            assert loop_lag.startswith("max ") and " ms · p99 " in loop_lag, loop_lag

            await show("partitions", f"{leader_replica('0')}?.dataset.leo >= 6")
            [shown] = control.partitions("shown")
            leader = shown["leader"]
            assert await browser.evaluate(f"{leader_replica('0')}.dataset.hw") == str(
                next(r["high_watermark"] for r in shown["replicas_state"]
                     if r["broker"] == leader))
            assert await browser.evaluate("document.querySelectorAll('h2').length") == 1  # no __
            # the controller's partition state machine
            assert await browser.evaluate(
                "document.querySelector('tr[data-topic=shown] [data-state]').dataset.state"
            ) == shown["state"] == "OnlinePartition"

            # Two snapshots, so that the sparklines have a line; the fetch purgatories watch the
            # followers' parked fetches.
            await show("purgatory", "Number(document.body.dataset.renders) >= 2 && "
                                    "document.querySelectorAll('polyline').length > 0")
            watched = await browser.evaluate(
                "[...document.querySelectorAll('tr[data-purgatory=fetch] [data-watched]')]"
                ".map((td) => Number(td.dataset.watched))")
            assert len(watched) == 3 and sum(watched) > 0

            await show("timer", "document.querySelectorAll('svg[data-level]').length >= 1")
            drawn = await browser.evaluate(
                "[...document.querySelectorAll('path[data-tasks]')]"
                ".reduce((n, p) => n + Number(p.dataset.tasks), 0)")
            buckets = await browser.evaluate("document.querySelectorAll('path.bucket').length")
            levels = await browser.evaluate("document.querySelectorAll('svg[data-level]').length")
            assert buckets == 20 * levels and drawn > 0  # delayed fetches and heartbeats

            await show("groups", "document.querySelector('[data-group=watchers]')"
                                 "?.dataset.state === 'Stable'")
            assert await browser.evaluate(
                "document.querySelector('[data-group=watchers] .pill.on').textContent") == "Stable"
            assert "shown [0]" in await browser.evaluate(
                "document.querySelector('[data-group=watchers]').textContent")
            # The share group's partition at its leader: the records its member holds
            row = "document.querySelector('[data-group=sharers] [data-share-partition=shown-0]')"
            await show("groups", f"{row}?.dataset.acquired > 0")
            assert int(await browser.evaluate(f"{row}.dataset.acquired")) == len(held)
            assert "acquired ×1 by" in await browser.evaluate(f"{row}.textContent")

            await show("transactions", "document.querySelector('[data-txn=console-txn]')"
                                       "?.dataset.state === 'CompleteCommit'")

            # A live value: the leader's log end offset grows on screen while a producer runs,
            # pushed by the event stream (the page is never reloaded).
            await browser.navigate(console + "partitions")
            before = int(await browser.wait_for(f"{leader_replica('0')}?.dataset.leo"))
            await browser.evaluate("window.notReloaded = true")
            background = BackgroundProducer(cluster.bootstrap)
            try:
                grown = await browser.wait_for(
                    f"window.notReloaded && Number({leader_replica('0')}.dataset.leo) >= "
                    f"{before + 20} && {leader_replica('0')}.dataset.leo")
            finally:
                background.stop()
            assert int(grown) >= before + 20 and background.sent >= 20

            # The fault form adds a fault and its row's button clears it (confirm() accepted).
            await browser.navigate(console)
            await browser.wait_for(f"document.querySelector('[data-action=stop-{leader}]')")
            await browser.evaluate("window.confirm = () => true")
            await browser.evaluate("""(() => {
                const form = document.getElementById('fault-form'), field = (n) => form.elements.namedItem(n);
                field('broker').value = '1'; field('api').value = 'DescribeGroups';
                field('delay_ms').value = '5'; form.requestSubmit(); })()""")
            fault = await browser.wait_for("document.querySelector('tr[data-fault]')?.dataset.fault")
            [armed] = control.faults()
            assert (armed["id"], armed["broker"], armed["delay_ms"]) == (int(fault), 1, 5)
            await browser.evaluate(f"document.querySelector('[data-action=clear-{fault}]').click()")
            await browser.wait_for("!document.querySelector('tr[data-fault]')")
            assert control.faults() == []

            # The stop button stops the leader; leadership moves.
            await browser.evaluate(f"document.querySelector('[data-action=stop-{leader}]').click()")
            await browser.wait_for(
                f"document.querySelector('tr[data-broker=\"{leader}\"]').dataset.alive === 'false'"
                f" && document.querySelector('[data-action=start-{leader}]')")
            await browser.screenshot(shots / "cluster-stopped.png")
            assert not next(b for b in control.brokers() if b["id"] == leader)["alive"]
            await browser.navigate(console + "partitions")
            moved = await browser.wait_for(
                "(l => l !== undefined && l !== '-1' && l !== '" + str(leader) + "' && l)"
                "(document.querySelector('tr[data-topic=\"shown\"][data-partition=\"0\"]')"
                "?.dataset.leader)")
            assert int(moved) in {0, 1, 2} - {leader}
            assert control.partitions("shown")[0]["leader"] == int(moved)
            await browser.screenshot(shots / "partitions-after-stop.png")
    finally:
        consumer.close()
        sharer.close()
        KEPT_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for shot in shots.glob("*.png"):
            shutil.copy(shot, KEPT_SCREENSHOTS / shot.name)
    assert {p.name for p in shots.glob("*.png")} >= {
        "cluster.png", "partitions.png", "purgatory.png", "timer.png", "groups.png",
        "transactions.png"}
