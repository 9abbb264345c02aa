"""`GET /metrics` of a real 3-broker cluster, scraped over HTTP and parsed with prometheus-client's
own parser: Kafka's JMX names, a `broker` label, values that follow what the cluster does."""

from __future__ import annotations

import urllib.request

from kafka import KafkaConsumer, KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from broker.control.control_client import ControlClient
from tests.cluster.client_producers import create_replicated_topic
from tests.harness import until


def scrape(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = response.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def by_broker(samples: list, **labels: str) -> dict[str, float]:
    return {s.labels["broker"]: s.value for s in samples
            if all(s.labels.get(k) == v for k, v in labels.items())}


async def test_metrics_follow_requests_partitions_and_a_stopped_broker(broker_factory):
    cluster = broker_factory(brokers=3, control=True)
    control = ControlClient(cluster.control.url)
    create_replicated_topic(cluster.bootstrap, "metered")  # one partition, RF 3
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(20):
        producer.send("metered", b"%d" % i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("metered", bootstrap_servers=cluster.bootstrap,
                             auto_offset_reset="earliest")
    assert len([record for _, record in zip(range(20), consumer, strict=False)]) == 20
    consumer.close()

    metrics = scrape(cluster.control.url)
    assert sum(by_broker(metrics["kafka_controller_kafkacontroller_activecontrollercount"])
               .values()) == 1
    assert by_broker(metrics["kafka_server_replicamanager_partitioncount"]) == {
        "0": 1, "1": 1, "2": 1}
    leaders = by_broker(metrics["kafka_server_replicamanager_leadercount"])
    [leader] = [b for b, n in leaders.items() if n == 1]
    assert by_broker(metrics["kafka_server_replicamanager_underreplicatedpartitions"]) == {
        "0": 0, "1": 0, "2": 0}
    produced = sum(by_broker(metrics["kafka_network_requestmetrics_requests"],
                             request="Produce").values())
    assert produced >= 1
    # A consumer's Fetch counts as Fetch and as FetchConsumer, as Kafka's request metrics (the
    # embedded followers fetch without requests: no FetchFollower here).
    requests = metrics["kafka_network_requestmetrics_requests"]
    fetches = by_broker(requests, request="Fetch")
    assert fetches[leader] >= 1 and by_broker(requests, request="FetchConsumer") == fetches
    assert by_broker(requests, request="FetchFollower") == {}
    # The histogram: cumulative buckets ending in +Inf, which counts every request.
    buckets = [s for s in metrics["kafka_network_requestmetrics_totaltimems"]
               if s.name.endswith("_bucket") and s.labels["request"] == "Produce"
               and s.labels["broker"] == leader]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == by_broker(
        metrics["kafka_network_requestmetrics_requests"], request="Produce")[leader]
    assert [b.value for b in buckets] == sorted(b.value for b in buckets)
    purgatories = {s.labels["delayedOperation"] for s in
                   metrics["kafka_server_delayedoperationpurgatory_purgatorysize"]}
    assert purgatories == {"Produce", "Fetch", "DeleteRecords", "Heartbeat", "Rebalance"}
    # Followers' fetches park in the leader's fetch purgatory while the partition is idle.
    assert metrics["kafka_sim_timer_tasks"][0].value >= 1
    # The event loop's lag over the last minute, and how long a step may have held it.
    lag = metrics["kafka_sim_event_loop_lag_max_ms"][0].value
    assert 0 <= metrics["kafka_sim_event_loop_lag_p99_ms"][0].value <= lag
    assert metrics["kafka_sim_event_loop_held"][0].value >= 0

    follower = next(b for b in ("0", "1", "2") if b != leader)
    control.stop_broker(int(follower))

    async def under_replicated() -> bool:
        got = by_broker(scrape(cluster.control.url)[
            "kafka_server_replicamanager_underreplicatedpartitions"])
        return got.get(leader) == 1 and follower not in got  # a stopped broker is not scraped

    await until(under_replicated)
