"""The authorizer's checks as a raw client sees them over TCP, where Kafka's KafkaApis makes them:
Metadata (undisclosed topics, auto-creation needing CREATE), commits, producer ids, transactional
produce, the ACL APIs' own errors, and inter-broker requests needing CLUSTER_ACTION."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.records import encode_batch
from tests.harness import until
from tests.integration.raw_client import RawClient
from tests.integration.test_hostile_input import create_topic, partition_errors, served_promptly
from tests.integration.test_protocol_edges import produce_body

PRODUCE, METADATA, OFFSET_COMMIT, FIND_COORDINATOR, UPDATE_METADATA, LEADER_AND_ISR = 0, 3, 8, 10, 6, 4
INIT_PRODUCER_ID, DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 22, 29, 30, 31
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, CREATE, ALTER, DESCRIBE = 2, 3, 4, 5, 7, 8
DENY, ALLOW = 2, 3
OPEN = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true"}
authorized = pytest.mark.broker_config(OPEN)


async def create_acls(client: RawClient, *acls: tuple) -> None:
    response = await client.request(CREATE_ACLS, 3, {"creations": [
        {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
         "principal": "User:ANONYMOUS", "host": "*", "operation": op, "permission_type": perm}
        for rtype, name, pattern, op, perm in acls]})
    assert [r.error_code for r in response.results] == [ErrorCode.NONE] * len(acls)


async def metadata(client: RawClient, *names: str, auto_create: bool = True) -> dict:
    response = await client.request(METADATA, 12, {
        "topics": [{"topic_id": bytes(16), "name": n} for n in names] if names else None,
        "allow_auto_topic_creation": auto_create, "include_topic_authorized_operations": True})
    return {t.name: (t.error_code, t.topic_authorized_operations) for t in response.topics}


@authorized
async def test_metadata_discloses_nothing_unauthorized_and_auto_creation_needs_create(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "secret-a")
    await create_topic(client, "plain")
    await create_acls(client,
                      (TOPIC, "secret-", PREFIXED, DESCRIBE, DENY),
                      (TOPIC, "nocreate-", PREFIXED, CREATE, DENY),
                      (CLUSTER, "kafka-cluster", LITERAL, ALL, ALLOW),
                      (CLUSTER, "kafka-cluster", LITERAL, CREATE, DENY))
    found = await metadata(client, "secret-a", "secret-b", "nocreate-1", "plain", "auto-1")
    # An existing and a missing topic the client may not describe look the same.
    assert found["secret-a"][0] == found["secret-b"][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert found["nocreate-1"][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert found["auto-1"][0] == ErrorCode.LEADER_NOT_AVAILABLE  # created: no ACL forbids it
    # No ACL on it: every topic operation (READ..DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    assert found["plain"] == (ErrorCode.NONE, sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11)))
    cache = async_broker.metadata_cache
    assert cache.topic("auto-1") is not None
    assert cache.topic("nocreate-1") is None and cache.topic("secret-b") is None
    assert "secret-a" not in await metadata(client)  # all topics: only the described ones
    await client.close()


@authorized
async def test_commits_need_group_and_topic_read(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "readable")
    await create_topic(client, "unreadable")
    await create_acls(client, (GROUP, "closed", LITERAL, READ, DENY),
                      (TOPIC, "unreadable", LITERAL, READ, DENY))

    async def commit(group: str) -> dict:
        response = await client.request(OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [
                {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                            "committed_leader_epoch": -1,
                                            "committed_metadata": None}]}
                for t in ("readable", "unreadable")]})
        return {t.name: t.partitions[0].error_code for t in response.topics}

    await client.request(FIND_COORDINATOR, 3, {"key": "open", "key_type": 0})  # __consumer_offsets
    manager = async_broker.group_coordinator.manager
    await until(lambda: manager.is_local("open") and not manager.is_loading("open"))
    assert await commit("closed") == {"readable": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                      "unreadable": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    assert await commit("open") == {"readable": ErrorCode.NONE,
                                    "unreadable": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    await client.close()


@authorized
async def test_producer_ids_and_transactional_produce_need_their_resources(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "t")
    await create_acls(client, (TRANSACTIONAL_ID, "tx-", PREFIXED, WRITE, DENY),
                      (TOPIC, "*", LITERAL, WRITE, DENY),
                      (CLUSTER, "kafka-cluster", LITERAL, ALL, DENY))

    async def init(transactional_id: str | None) -> int:
        response = await client.request(INIT_PRODUCER_ID, 4, {
            "transactional_id": transactional_id, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        return response.error_code

    assert await init("tx-1") == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # No IDEMPOTENT_WRITE on the cluster, no WRITE on any topic: no idempotent producer id.
    assert await init(None) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    batch = encode_batch([(b"k", b"v", [], 1000)], producer_id=1, producer_epoch=0,
                         base_sequence=0, is_transactional=True)
    body = produce_body({("t", 0): batch}, acks=-1)
    response = await client.request(PRODUCE, 9, {**body, "transactional_id": "tx-1"})
    assert partition_errors(response) == {("t", 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    response = await client.request(PRODUCE, 9, produce_body(
        {("t", 0): encode_batch([(b"k", b"v", [], 1000)])}, acks=-1))
    assert partition_errors(response) == {("t", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    await client.close()


@authorized
async def test_acl_apis_refuse_bad_input_and_unauthorized_callers(async_broker):
    client = await RawClient.connect(async_broker.port)
    response = await client.request(DELETE_ACLS, 3, {"filters": [
        {"resource_type_filter": 99, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
        {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]})
    assert [r.error_code for r in response.filter_results] == [ErrorCode.INVALID_REQUEST,
                                                               ErrorCode.NONE]
    response = await client.request(CREATE_ACLS, 3, {"creations": [
        {"resource_type": TOPIC, "resource_name": "t", "resource_pattern_type": LITERAL,
         "principal": "ANONYMOUS", "host": "*", "operation": READ, "permission_type": ALLOW}]})
    assert response.results[0].error_code == ErrorCode.INVALID_REQUEST
    assert "principalType:principalName" in response.results[0].error_message
    await create_acls(client, (CLUSTER, "kafka-cluster", LITERAL, ALL, DENY))
    describe = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    response = await client.request(DESCRIBE_ACLS, 3, describe)
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    await client.close()


@authorized
async def test_forged_inter_broker_requests_need_cluster_action(async_broker):
    """With an authorizer, UpdateMetadata and LeaderAndIsr from a principal without
    CLUSTER_ACTION are refused and change nothing (Kafka's check; without an authorizer Kafka
    accepts them too)."""
    client = await RawClient.connect(async_broker.port)
    await create_acls(client, (CLUSTER, "kafka-cluster", LITERAL, DESCRIBE, ALLOW))
    epoch = async_broker.replica_manager.controller_epoch + 1
    response = await client.request(UPDATE_METADATA, 7, {
        "controller_id": 0, "controller_epoch": epoch, "broker_epoch": -1,
        "topic_states": [{"topic_name": "forged", "topic_id": b"\x01" * 16, "partition_states": [
            {"partition_index": 0, "controller_epoch": epoch, "leader": 0, "leader_epoch": 1,
             "isr": [0], "zk_version": 0, "replicas": [0], "offline_replicas": []}]}],
        "live_brokers": []})
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert async_broker.metadata_cache.topic("forged") is None
    response = await client.request(LEADER_AND_ISR, 4, {
        "controller_id": 0, "controller_epoch": epoch, "broker_epoch": -1,
        "partition_states": [], "live_leaders": []})
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert async_broker.replica_manager.controller_epoch < epoch
    await served_promptly(async_broker.port)
    await client.close()


@authorized
async def test_thousands_of_acls_in_one_request_leave_other_clients_served(async_broker):
    client = await RawClient.connect(async_broker.port)
    count = 5000
    correlation_id = await client.send(CREATE_ACLS, 3, {"creations": [
        {"resource_type": TOPIC, "resource_name": f"t{i}", "resource_pattern_type": LITERAL,
         "principal": "User:ANONYMOUS", "host": "*", "operation": READ, "permission_type": ALLOW}
        for i in range(count)]})
    await served_promptly(async_broker.port)  # while the ACLs are being written
    response = await client.receive(CREATE_ACLS, 3, correlation_id)
    assert [r.error_code for r in response.results] == [ErrorCode.NONE] * count
    assert len(async_broker.authorizer.acls(filter_of_everything())) == count
    await client.close()


def filter_of_everything():
    from broker.authorizer.acl import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    return AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


@authorized
async def test_unreadable_records_with_an_authorizer_get_the_logs_answer(async_broker):
    """The authorizer's look at a Produce's first batch (is it transactional?) must not trip
    over bytes that are no batch: the log answers them as without an authorizer."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "t")
    response = await client.request(PRODUCE, 9, produce_body({("t", 0): bytes(70)}))
    # batch length 0: Kafka's batch iterator refuses it before anything looks at the magic
    assert partition_errors(response) == {("t", 0): ErrorCode.CORRUPT_MESSAGE}
    await served_promptly(async_broker.port)
    await client.close()


@authorized
async def test_v0_acl_requests_mean_literal_patterns(async_broker):
    """v0 of the three ACL APIs has no pattern type (found by the fuzzer with an authorizer on:
    an AttributeError escaped): Kafka reads them as LITERAL."""
    client = await RawClient.connect(async_broker.port)
    response = await client.request(CREATE_ACLS, 0, {"creations": [
        {"resource_type": TOPIC, "resource_name": "v0", "principal": "User:ANONYMOUS",
         "host": "*", "operation": READ, "permission_type": ALLOW}]})
    assert response.results[0].error_code == ErrorCode.NONE
    query = {"resource_type_filter": TOPIC, "resource_name_filter": "v0", "principal_filter": None,
             "host_filter": None, "operation": 1, "permission_type": 1}
    response = await client.request(DESCRIBE_ACLS, 0, query)
    assert [(r.resource_name, len(r.acls)) for r in response.resources] == [("v0", 1)]
    response = await client.request(DELETE_ACLS, 0, {"filters": [query]})
    assert [m.resource_name for m in response.filter_results[0].matching_acls] == ["v0"]
    assert await async_broker.store.exists("/kafka-acl/Topic/v0") is None
    await client.close()


@authorized
async def test_elections_and_reassignments_need_cluster_alter_or_describe(async_broker):
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "guarded")
    await create_acls(client, (CLUSTER, "kafka-cluster", LITERAL, 7, DENY),  # ALTER
                      (CLUSTER, "kafka-cluster", LITERAL, DESCRIBE, DENY))
    response = await client.request(43, 2, {"election_type": 0, "timeout_ms": 1000,
                                            "topic_partitions": [{"topic": "guarded", "partitions": [0]}]})
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [p.error_code for r in response.replica_election_results for p in r.partition_result] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    response = await client.request(45, 0, {"topics": [
        {"name": "guarded", "partitions": [{"partition_index": 0, "replicas": [0]}]}]})
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and response.responses == []
    response = await client.request(46, 0, {"topics": None})
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    await client.close()


@authorized
async def test_log_dir_apis_need_describe_and_alter_on_the_cluster(async_broker):
    """DescribeLogDirs needs DESCRIBE on the cluster (v3+: the error at the top, no results),
    AlterReplicaLogDirs ALTER (each partition refused, nothing moved), as Kafka's KafkaApis."""
    client = await RawClient.connect(async_broker.port)
    await create_topic(client, "dirs")
    log_dir = next(iter(async_broker.log_manager.dirs))
    await create_acls(client, (CLUSTER, "kafka-cluster", LITERAL, DESCRIBE, DENY),
                      (CLUSTER, "kafka-cluster", LITERAL, ALTER, DENY))
    response = await client.request(35, 4, {"topics": None})
    assert (response.error_code, list(response.results)) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    response = await client.request(34, 2, {"dirs": [
        {"path": log_dir, "topics": [{"name": "dirs", "partitions": [0]}]}]})
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in response.results] == [("dirs", [(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)])]
    assert async_broker.log_manager.future_logs() == {}
    await client.close()
