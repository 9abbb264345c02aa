"""`GET /metrics`: the cluster's numbers in Prometheus' text format, named as the JMX exporter names
Kafka's MBeans (kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions ->
kafka_server_replicamanager_underreplicatedpartitions), each with a `broker` label. What Kafka has
no MBean for (the timing wheel) is under `kafka_sim_`."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["CONTENT_TYPE_LATEST", "render"]

# Our purgatory names -> Kafka's delayedOperation label.
PURGATORIES = {"produce": "Produce", "fetch": "Fetch", "delete_records": "DeleteRecords",
               "heartbeat": "Heartbeat", "rebalance": "Rebalance"}
# broker metrics() key -> (name, help) of a gauge per broker.
BROKER_GAUGES = {
    "partitions": ("kafka_server_replicamanager_partitioncount", "Partitions hosted"),
    "leaders": ("kafka_server_replicamanager_leadercount", "Partitions led"),
    "under_replicated": ("kafka_server_replicamanager_underreplicatedpartitions",
                         "Led partitions whose ISR is smaller than their replicas"),
    "under_min_isr": ("kafka_server_replicamanager_underminisrpartitioncount",
                      "Led partitions whose ISR is below min.insync.replicas"),
    "offline_replicas": ("kafka_server_replicamanager_offlinereplicacount",
                         "Replicas offline because their log dir failed"),
}


class _Snapshot:
    """A collector over one `ClusterControl.metrics()` snapshot."""

    def __init__(self, snapshot: dict) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        brokers: dict[str, dict] = self.snapshot["brokers"]
        for key, (name, doc) in BROKER_GAUGES.items():
            family = GaugeMetricFamily(name, doc, labels=["broker"])
            for broker, m in brokers.items():
                family.add_metric([broker], m[key])
            yield family
        controller = GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                       "1 on the active controller", labels=["broker"])
        for broker, m in brokers.items():
            controller.add_metric([broker], int(m["active_controller"]))
        yield controller
        yield from self._purgatories(brokers)
        yield from self._requests(brokers)
        yield from self._fetch_sessions(brokers)
        yield from self._timer(self.snapshot["timer"])
        yield from self._event_loop(self.snapshot.get("event_loop"))

    @staticmethod
    def _event_loop(loop: dict | None) -> Iterator[Metric]:
        if loop is None:
            return
        for key, doc in (("lag_max_ms", "Latest a 100 ms event-loop tick ran, over the last "
                                        "minute (every client of the process waited as long)"),
                         ("lag_p99_ms", "99th percentile of the event-loop ticks' lateness "
                                        "over the last minute")):
            gauge = GaugeMetricFamily(f"kafka_sim_event_loop_{key}", doc)
            gauge.add_metric([], loop[key])
            yield gauge
        held = CounterMetricFamily("kafka_sim_event_loop_held",
                                   "Steps that held the event loop over a second")
        held.add_metric([], loop["held_warnings"])
        yield held

    @staticmethod
    def _purgatories(brokers: dict[str, dict]) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Operations watched in the purgatory (one per key watched)",
            labels=["broker", "delayedOperation"])
        delayed = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "Operations waiting in the purgatory", labels=["broker", "delayedOperation"])
        expired = CounterMetricFamily(
            "kafka_sim_purgatory_expired", "Operations the reaper expired",
            labels=["broker", "delayedOperation"])
        for broker, m in brokers.items():
            for ours, kafka_name in PURGATORIES.items():
                stats = m["purgatory"].get(ours)
                if stats is None:
                    continue
                size.add_metric([broker, kafka_name], stats["watched"])
                delayed.add_metric([broker, kafka_name], stats["delayed"])
                expired.add_metric([broker, kafka_name], stats["expired"])
        yield from (size, delayed, expired)

    @staticmethod
    def _requests(brokers: dict[str, dict]) -> Iterator[Metric]:
        rate = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                   "Requests handled (Kafka's RequestsPerSec count)",
                                   labels=["broker", "request"])
        times = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Request total time in ms, from decode to encoded response, waits included",
            labels=["broker", "request"])
        for broker, m in brokers.items():
            for api, t in m["requests"].items():
                rate.add_metric([broker, api], t["count"])
                times.add_metric([broker, api], [(f"{bound:g}".replace("inf", "+Inf"), count)
                                                 for bound, count in t["buckets"]],
                                 sum_value=t["sum_ms"])
        yield from (rate, times)
        sent = CounterMetricFamily(
            "kafka_sim_fetch_record_bytes",
            "Record bytes of fetch responses left in the segment files, by how they went out: "
            "sendfile, or copied (the socket was full)", labels=["broker", "path"])
        for broker, m in brokers.items():
            for path, count in m["fetch_record_bytes"].items():
                sent.add_metric([broker, path], count)
        yield sent

    @staticmethod
    def _fetch_sessions(brokers: dict[str, dict]) -> Iterator[Metric]:
        sessions = GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                     "Fetch sessions cached", labels=["broker"])
        partitions = GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions the fetch sessions hold", labels=["broker"])
        evictions = CounterMetricFamily(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
            "Fetch sessions evicted", labels=["broker"])
        for broker, m in brokers.items():
            stats = m["fetch_sessions"]
            sessions.add_metric([broker], stats["sessions"])
            partitions.add_metric([broker], stats["partitions"])
            evictions.add_metric([broker], stats["evictions"])
        yield from (sessions, partitions, evictions)

    @staticmethod
    def _timer(timer: dict) -> Iterator[Metric]:
        yield GaugeMetricFamily("kafka_sim_timer_tasks", "Tasks on the timing wheel",
                                value=timer["size"])
        buckets = GaugeMetricFamily("kafka_sim_timer_wheel_tasks",
                                    "Tasks per level of the hierarchical timing wheel",
                                    labels=["level"])
        for level in timer["levels"]:
            buckets.add_metric([str(level["level"])], level["tasks"])
        yield buckets


def render(snapshot: dict) -> bytes:
    """The text exposition of a `ClusterControl.metrics()` snapshot."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(snapshot))
    return generate_latest(registry)
