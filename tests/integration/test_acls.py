"""ACLs end to end with real clients over TCP: kafka-python's and confluent-kafka's admin ACL calls,
and the authorizer allowing and denying produce, consume, group membership, topic creation and
describe for the principal of a PLAINTEXT connection (User:ANONYMOUS), as Kafka does."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as CkResourceType
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    GroupAuthorizationFailedError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)

from tests.docs import section as section_of

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
OPEN = {**AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
ANONYMOUS = "User:ANONYMOUS"
LITERAL, PREFIXED = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED
ALLOW, DENY = ACLPermissionType.ALLOW, ACLPermissionType.DENY


def acl(operation, permission, resource_type, name, pattern=LITERAL) -> ACL:
    return ACL(ANONYMOUS, "*", operation, permission, ResourcePattern(resource_type, name, pattern))


def everything() -> ACLFilter:
    return ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                     ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))


def test_acl_apis_answer_security_disabled_without_an_authorizer(kafka_broker):
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    with pytest.raises(SecurityDisabledError):
        admin.describe_acls(everything())
    result = admin.create_acls([acl(ACLOperation.READ, ALLOW, ResourceType.TOPIC, "t")])
    assert result["succeeded"] == [] and result["failed"] == [SecurityDisabledError]
    admin.close()
    ck = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    binding = AclBinding(CkResourceType.TOPIC, "t", ResourcePatternType.LITERAL, ANONYMOUS, "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException, match="SECURITY_DISABLED"):
        ck.create_acls([binding])[binding].result(10)


def test_kafka_python_acls_and_what_they_deny(broker_factory):
    broker = broker_factory(OPEN)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("hidden", 1, 1), NewTopic("locked", 1, 1),
                         NewTopic("private", 1, 1)])
    acls = [
        acl(ACLOperation.DESCRIBE, DENY, ResourceType.TOPIC, "hidden"),
        acl(ACLOperation.DESCRIBE, ALLOW, ResourceType.TOPIC, "locked"),
        acl(ACLOperation.WRITE, DENY, ResourceType.TOPIC, "locked"),
        acl(ACLOperation.WRITE, ALLOW, ResourceType.TOPIC, "private"),
        acl(ACLOperation.READ, DENY, ResourceType.TOPIC, "private"),
        acl(ACLOperation.CREATE, DENY, ResourceType.TOPIC, "nocreate-", PREFIXED),
        acl(ACLOperation.DESCRIBE, ALLOW, ResourceType.GROUP, "blocked-", PREFIXED),
        acl(ACLOperation.READ, DENY, ResourceType.GROUP, "blocked-", PREFIXED),
        # CREATE on the cluster would allow any topic: only per-topic CREATE is left
        acl(ACLOperation.ALL, ALLOW, ResourceType.CLUSTER, "kafka-cluster"),
        acl(ACLOperation.CREATE, DENY, ResourceType.CLUSTER, "kafka-cluster"),
    ]
    created = admin.create_acls(acls)
    assert created["failed"] == [] and created["succeeded"] == acls
    described, _ = admin.describe_acls(everything())
    assert set(described) == set(acls)
    only_locked, _ = admin.describe_acls(ACLFilter(
        None, None, ACLOperation.ANY, ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.TOPIC, "locked", LITERAL)))
    assert set(only_locked) == set(acls[1:3])
    applying, _ = admin.describe_acls(ACLFilter(  # MATCH: every pattern that applies to the name
        None, None, ACLOperation.ANY, ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.GROUP, "blocked-7", ACLResourcePatternType.MATCH)))
    assert set(applying) == set(acls[6:8])

    # Describe: the topic is not listed, as if it did not exist.
    assert "hidden" not in admin.list_topics() and "locked" in admin.list_topics()
    # Produce: WRITE denied on "locked" (the client may describe it, so Produce itself refuses).
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("locked", b"no").get(10)
    producer.send("private", b"kept").get(10)
    # Consume: READ denied on "private" (Fetch answers TOPIC_AUTHORIZATION_FAILED).
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("private", 0)])
    with pytest.raises(TopicAuthorizationFailedError):
        for _ in range(20):
            consumer.poll(500)
    consumer.close()
    # Group: READ denied on the group's prefix (JoinGroup answers GROUP_AUTHORIZATION_FAILED).
    member = KafkaConsumer("private", bootstrap_servers=broker.bootstrap, group_id="blocked-7")
    with pytest.raises(GroupAuthorizationFailedError):
        for _ in range(20):
            member.poll(500)
    member.close()
    # Create: CREATE denied on the cluster and on the prefix; other topics have no ACL.
    with pytest.raises(TopicAuthorizationFailedError):
        admin.create_topics([NewTopic("nocreate-x", 1, 1)], raise_errors=True)
    admin.create_topics([NewTopic("fine-x", 1, 1)], raise_errors=True)
    assert "nocreate-x" not in admin.list_topics() and "fine-x" in admin.list_topics()

    # Delete what a filter matches; the denials go with them.
    results = admin.delete_acls([ACLFilter(
        ANONYMOUS, None, ACLOperation.ANY, DENY,
        ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY))])
    assert set(results[0][1]) == {acls[0], acls[2], acls[4], acls[5]}
    assert "hidden" in admin.list_topics()  # no ACL left on it: allow.everyone.if.no.acl.found
    producer.send("hidden", b"now").get(10)
    with pytest.raises(TopicAuthorizationFailedError):  # ACLs on it (DESCRIBE), none allows WRITE
        producer.send("locked", b"still no").get(10)
    producer.close()
    admin.close()


def test_confluent_kafka_acl_calls_and_denied_produce(broker_factory):
    broker = broker_factory(OPEN)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"ck-{uuid.uuid4().hex[:8]}"
    bindings = [
        AclBinding(CkResourceType.TOPIC, topic, ResourcePatternType.LITERAL, ANONYMOUS, "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        AclBinding(CkResourceType.TOPIC, "ck-", ResourcePatternType.PREFIXED, ANONYMOUS, "*",
                   AclOperation.WRITE, AclPermissionType.DENY),
        AclBinding(CkResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice",
                   "10.0.0.1", AclOperation.ALL, AclPermissionType.ALLOW),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(10) is None
    anything = AclBindingFilter(CkResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(anything).result(10)) == set(bindings)
    matching = AclBindingFilter(CkResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(matching).result(10)) == set(bindings[:2])
    bad = AclBinding(CkResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL,
                     ANONYMOUS, "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException, match="INVALID_REQUEST|kafka-cluster"):
        admin.create_acls([bad])[bad].result(10)

    admin.create_topics([_ck_new_topic(topic)])[topic].result(10)
    delivered: list = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.send.max.retries": 0})
    producer.produce(topic, b"denied", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(10)
    assert delivered and delivered[0].code() == 29  # TOPIC_AUTHORIZATION_FAILED

    deleted = admin.delete_acls([AclBindingFilter(
        CkResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)])
    assert set(list(deleted.values())[0].result(10)) == set(bindings[:2])
    assert admin.describe_acls(anything).result(10) == [bindings[2]]
    producer = Producer({"bootstrap.servers": broker.bootstrap})  # no ACL on the topic now
    producer.produce(topic, b"allowed", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(10)
    assert delivered[1:] == [None]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-reader",
                         "auto.offset.reset": "earliest"})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    message = consumer.poll(10)
    assert message is not None and message.error() is None and message.value() == b"allowed"
    consumer.close()


def _ck_new_topic(name: str):
    from confluent_kafka.admin import NewTopic as CkNewTopic
    return CkNewTopic(name, num_partitions=1, replication_factor=1)


def test_closed_cluster_prefixed_grants_on_every_broker_and_super_users(broker_factory):
    """With allow.everyone.if.no.acl.found=false only the ACLs allow anything: PREFIXED grants
    made through one broker hold on all three (and across a restart); deleting them denies at
    once everywhere; a super user needs no ACL."""
    broker = broker_factory(OPEN, brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    grants = [acl(ACLOperation.ALL, ALLOW, ResourceType.TOPIC, "app-", PREFIXED),
              acl(ACLOperation.READ, ALLOW, ResourceType.GROUP, "app-", PREFIXED),
              acl(ACLOperation.ALTER, ALLOW, ResourceType.CLUSTER, "kafka-cluster"),
              acl(ACLOperation.DESCRIBE, ALLOW, ResourceType.CLUSTER, "kafka-cluster")]
    assert admin.create_acls(grants)["failed"] == []
    admin.close()
    broker.overrides = AUTHORIZER  # now closed: what no ACL allows is denied
    broker.restart()

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    assert set(admin.describe_acls(everything())[0]) == set(grants)  # kept in the store
    # A leader on each broker, three replicas each: followers and the controller work through
    # in-process calls that no authorizer sees (nobody has CLUSTER_ACTION here).
    admin.create_topics([NewTopic("app-multi", 3, 3)])
    with pytest.raises(TopicAuthorizationFailedError):
        admin.create_topics([NewTopic("other", 1, 1)], raise_errors=True)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0, acks="all")
    for partition in range(3):
        producer.send("app-multi", b"v%d" % partition, partition=partition).get(10)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("other", b"no").get(10)
    cache = broker.cluster.brokers[0].metadata_cache
    assert [len(cache.partition_state("app-multi", p).isr) for p in range(3)] == [3, 3, 3]
    consumer = KafkaConsumer("app-multi", bootstrap_servers=broker.bootstrap, group_id="app-readers",
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    values = []
    for record in consumer:  # a group member (GROUP READ) reading every broker's partition
        values.append(record.value)
        if len(values) == 3:
            break
    assert sorted(values) == [b"v0", b"v1", b"v2"]
    consumer.commit()
    consumer.close()
    assert admin.list_topics() == ["app-multi"]  # __consumer_offsets: not described

    admin.delete_acls([ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                 ResourcePatternFilter(ResourceType.TOPIC, "app-", PREFIXED))])
    for partition in range(3):  # every leader's cache followed the change notification
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("app-multi", b"x", partition=partition).get(10)
    producer.close()
    admin.close()

    broker.overrides = {**AUTHORIZER, "super.users": f"User:admin;{ANONYMOUS}"}
    broker.restart()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    producer.send("other", b"as a super user").get(10)
    producer.close()


def test_readme_acl_example_runs_as_written(broker_factory):
    """The README's "### ACLs" snippet, run as written against a broker started as it says:
    `payments` becomes read-only for everyone, other topics stay open."""

    section = section_of("docs/security.md", "## ACLs")
    assert "-o\nallow.everyone.if.no.acl.found=true" in section
    snippet = section[section.index("```python\n") + 10:section.index("\n```", section.index("```python"))]
    broker = broker_factory(OPEN)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    producer.send("payments", b"before").get(10)
    exec(snippet.replace("localhost:9092", broker.bootstrap), {})  # noqa: S102
    producer.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("payments", b"after").get(10)
    producer.send("elsewhere", b"open").get(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("payments", 0)])
    assert next(iter(consumer)).value == b"before"
    consumer.close()


async def test_aiokafka_producer_and_group_consumer_denied_and_allowed(broker_factory):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import GroupAuthorizationFailedError as AioGroupDenied
    from aiokafka.errors import TopicAuthorizationFailedError as AioTopicDenied

    broker = broker_factory(OPEN)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("aio-open", 1, 1), NewTopic("aio-locked", 1, 1)])
    admin.create_acls([acl(ACLOperation.DESCRIBE, ALLOW, ResourceType.TOPIC, "aio-locked"),
                       acl(ACLOperation.DESCRIBE, ALLOW, ResourceType.GROUP, "aio-denied"),
                       acl(ACLOperation.READ, DENY, ResourceType.GROUP, "aio-denied")])
    admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait("aio-open", b"hello")
        with pytest.raises(AioTopicDenied):
            await producer.send_and_wait("aio-locked", b"no")
    finally:
        await producer.stop()
    allowed = AIOKafkaConsumer("aio-open", bootstrap_servers=broker.bootstrap, group_id="aio-ok",
                               auto_offset_reset="earliest")
    await allowed.start()
    try:
        assert (await asyncio.wait_for(allowed.getone(), 15)).value == b"hello"
    finally:
        await allowed.stop()
    denied = AIOKafkaConsumer("aio-open", bootstrap_servers=broker.bootstrap,
                              group_id="aio-denied", auto_offset_reset="earliest")
    try:
        with pytest.raises(AioGroupDenied):  # JoinGroup refused (start() joins the group)
            await denied.start()
            await asyncio.wait_for(denied.getone(), 15)
    finally:
        await denied.stop()
