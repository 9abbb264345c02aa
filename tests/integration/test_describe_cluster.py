"""DescribeCluster (60) as the Admin clients see it and its edge cases over raw TCP: live brokers on
the request's listener, the controller, authorized operations, endpoint types."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient
from tests.integration.test_acl_checks import (
    ALLOW,
    CLUSTER,
    DENY,
    DESCRIBE,
    LITERAL,
    authorized,
    create_acls,
)

DESCRIBE_CLUSTER = 60


def test_confluent_admin_describes_the_three_brokers_and_the_controller(broker_factory):
    cluster = broker_factory(brokers=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_cluster(include_authorized_operations=True).result(30)
    ports = sorted(int(a.split(":")[1]) for a in cluster.bootstrap.split(","))
    assert sorted(n.port for n in described.nodes) == ports
    assert sorted(n.id for n in described.nodes) == [0, 1, 2]
    assert described.controller is not None and described.controller.id in (0, 1, 2)
    assert described.cluster_id == cluster.cluster.cluster_id
    # No authorizer: every cluster operation Kafka reports is allowed.
    assert {op.name for op in described.authorized_operations} >= {
        "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
        "ALTER", "DESCRIBE"}


async def test_endpoint_types_and_versions(async_broker):
    client = await RawClient.connect(async_broker.port)
    v0 = await client.request(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert v0.error_code == ErrorCode.NONE and v0.controller_id == 0
    assert [(b.broker_id, b.port) for b in v0.brokers] == [(0, async_broker.port)]
    assert v0.cluster_authorized_operations == -(2**31)  # not asked for
    brokers = await client.request(DESCRIBE_CLUSTER, 1, {
        "include_cluster_authorized_operations": False, "endpoint_type": 1})
    assert brokers.error_code == ErrorCode.NONE and brokers.endpoint_type == 1
    controllers = await client.request(DESCRIBE_CLUSTER, 1, {
        "include_cluster_authorized_operations": False, "endpoint_type": 2})
    assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE and not controllers.brokers
    unknown = await client.request(DESCRIBE_CLUSTER, 1, {
        "include_cluster_authorized_operations": False, "endpoint_type": 7})
    assert unknown.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    assert unknown.error_message == "Unsupported endpoint type 7"
    await client.close()


@authorized
async def test_authorized_operations_are_zero_without_describe_on_the_cluster(async_broker):
    """With an authorizer and ACLs on the cluster that do not allow DESCRIBE to this principal."""
    client = await RawClient.connect(async_broker.port)
    body = {"include_cluster_authorized_operations": True, "endpoint_type": 1}
    allowed = await client.request(DESCRIBE_CLUSTER, 1, body)
    assert allowed.cluster_authorized_operations & (1 << DESCRIBE)
    await create_acls(client, (CLUSTER, "kafka-cluster", LITERAL, DESCRIBE, DENY),
                      (CLUSTER, "kafka-cluster", LITERAL, 2, ALLOW))  # ALL allowed, DESCRIBE denied
    denied = await client.request(DESCRIBE_CLUSTER, 1, body)
    assert denied.error_code == ErrorCode.NONE and denied.cluster_authorized_operations == 0
    await client.close()
