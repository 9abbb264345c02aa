"""Brokers in separate processes whose one listener is SASL_SSL with client certificates required:
the controller's requests, followers' fetches and the controlled shutdown all go over TLS with a
PLAIN login, so an acks=all produce to a topic replicated on both brokers completes, and reads back."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.security_fixtures import certs, tls_settings
from tests.process_cluster import ProcessCluster, wait_until

__all__ = ["certs"]  # the fixture
pytestmark = pytest.mark.slow
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";')


def test_replication_over_sasl_ssl(zk_connect, tmp_path, certs):
    cluster = ProcessCluster(zk_connect, tmp_path, 2, listener="SASL_SSL", overrides={
        **tls_settings(certs, "required"),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    cluster.start()
    try:
        for i in cluster.ids:
            wait_until(lambda i=i: len([b for b in cluster.brokers(i) if b["alive"]]) == 2,
                       f"broker {i} to see both brokers")
        conf = {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
                "ssl.ca.location": str(certs["ca.pem"]),
                "ssl.certificate.location": str(certs["client-cert.pem"]),
                "ssl.key.location": str(certs["client-key.pem"])}
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("secured", 1, 2)])["secured"].result(30)
        for i in cluster.ids:  # the controller's LeaderAndIsr reached both, over SASL_SSL
            wait_until(lambda i=i: cluster.partitions("secured", i), f"broker {i} to know the topic")
        wait_until(lambda: len(cluster.partitions("secured", 0)[0]["isr"]) == 2,
                   "the follower to join the ISR over SASL_SSL")
        producer = Producer({**conf, "acks": "all"})
        for n in range(10):
            producer.produce("secured", b"r%d" % n)
        assert producer.flush(30) == 0
        consumer = Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("secured", 0, 0)])
        values = []
        while len(values) < 10:
            msg = consumer.poll(20)
            assert msg is not None and msg.error() is None
            values.append(msg.value())
        consumer.close()
        assert values == [b"r%d" % n for n in range(10)]
        # the follower fetched everything over SASL_SSL (its log end offset, as its leader knows it)
        leader = cluster.partitions("secured", 0)[0]["leader"]
        wait_until(lambda: [r["log_end_offset"] for r in
                            cluster.partitions("secured", leader)[0]["replicas_state"]] == [10, 10],
                   "the follower to fetch all ten records")
        assert len(cluster.partitions("secured", leader)[0]["isr"]) == 2
    finally:
        cluster.stop()
