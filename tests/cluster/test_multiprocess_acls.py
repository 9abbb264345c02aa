"""ACLs in a multi-process cluster on a real ZooKeeper: an ACL made through one broker process
applies on the others (their caches follow /kafka-acl-changes), while the brokers' own PLAINTEXT
traffic (User:ANONYMOUS) keeps its CLUSTER_ACTION (no ACL on the cluster, everyone allowed)."""

from __future__ import annotations

import asyncio

import pytest
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourceType,
)
from kafka.errors import TopicAuthorizationFailedError

from tests.integration.raw_client import RawClient
from tests.process_cluster import ProcessCluster, wait_until

pytestmark = pytest.mark.slow


def acl_count(port: int) -> int:
    """The ACLs one broker process's DescribeAcls shows (a raw client: that broker, no other)."""

    async def describe() -> int:
        client = await RawClient.connect(port)
        try:
            response = await client.request(29, 3, {
                "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
        finally:
            await client.close()
        assert response.error_code == 0
        return sum(len(r.acls) for r in response.resources)

    return asyncio.run(describe())


def test_an_acl_made_through_one_process_holds_on_every_leader(zk_connect, tmp_path):
    cluster = ProcessCluster(zk_connect, tmp_path, overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    cluster.start()
    try:
        cluster.wait_until_all_registered()
        first = f"127.0.0.1:{cluster.ports[0]}"
        admin = KafkaAdminClient(bootstrap_servers=first)
        # Three partitions, three replicas each: a leader in every process, every write followed
        # by two others (Fetch from followers, LeaderAndIsr: CLUSTER_ACTION over TCP).
        admin.create_topics([NewTopic("blocked", 3, 3), NewTopic("open", 3, 3)])
        denial = ACL("User:*", "*", ACLOperation.WRITE, ACLPermissionType.DENY,
                     ResourcePattern(ResourceType.TOPIC, "blocked", ACLResourcePatternType.LITERAL))
        allowed = ACL("User:*", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                      ResourcePattern(ResourceType.TOPIC, "blocked", ACLResourcePatternType.LITERAL))
        assert admin.create_acls([denial, allowed])["failed"] == []
        admin.close()
        for i in cluster.ids:  # each process answers DescribeAcls from its own cache
            wait_until(lambda i=i: acl_count(cluster.ports[i]) == 2, f"broker {i} to see the ACLs")
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=0)
        for partition in range(3):
            producer.send("open", b"v", partition=partition).get(30)
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send("blocked", b"v", partition=partition).get(30)
        producer.close()
        for partition in cluster.partitions("open", via=1):
            assert sorted(partition["isr"]) == [0, 1, 2], partition
    finally:
        cluster.stop()
