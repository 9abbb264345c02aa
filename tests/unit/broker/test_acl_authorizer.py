"""The authorizer's rules as Kafka's AclAuthorizer decides them, over a real embedded metadata
store: storage in ZooKeeper's layout, and a second broker's cache following change notifications."""

from __future__ import annotations

import json

import pytest

from broker.authorizer.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.authorizer.acl_authorizer import AclAuthorizer, parse_super_users
from broker.config import ConfigError, build_config
from broker.metadata.embedded_store import EmbeddedMetadataStore
from protocol.errors import ErrorCode
from tests.harness import watches_settled

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def binding(name, principal=ALICE, op=Op.READ, perm=Perm.ALLOW, host="*", rtype=RT.TOPIC,
            ptype=PT.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm))


def any_filter(**kw) -> AclBindingFilter:
    base = {"resource_type": RT.ANY, "name": None, "pattern_type": PT.ANY, "principal": None,
            "host": None, "operation": Op.ANY, "permission_type": Perm.ANY}
    return AclBindingFilter(**(base | kw))


@pytest.fixture
def store():
    return EmbeddedMetadataStore()


async def started(store, **kw) -> AclAuthorizer:
    authorizer = AclAuthorizer(store, **kw)
    await authorizer.start()
    return authorizer


async def test_no_acl_on_a_resource_follows_allow_everyone_if_no_acl_found(store):
    closed = await started(store)
    open_ = await started(store, allow_everyone_if_no_acl_found=True)
    assert not closed.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert open_.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    # Once the resource has any ACL (even for someone else), only the ACLs decide.
    await open_.create_acls([binding("t", principal=BOB)])
    assert not open_.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert open_.authorize(BOB, HOST, Op.READ, RT.TOPIC, "t")
    assert open_.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "other")


async def test_super_users_are_always_allowed(store):
    authorizer = await started(
        store, super_users=parse_super_users(" User:admin ; User:ANONYMOUS;"))
    assert authorizer.super_users == {"User:admin", "User:ANONYMOUS"}
    await authorizer.create_acls([binding("t", principal="User:admin", op=Op.ALL, perm=Perm.DENY)])
    assert authorizer.authorize("User:admin", HOST, Op.WRITE, RT.TOPIC, "t")
    assert authorizer.authorize_by_resource_type("User:admin", HOST, Op.WRITE, RT.TOPIC)
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t")


async def test_deny_wins_over_allow_and_wildcards_apply(store):
    authorizer = await started(store)
    await authorizer.create_acls([
        binding("*", principal="User:*", op=Op.ALL),  # everyone may do anything on any topic...
        binding("secret", principal=ALICE, op=Op.READ, perm=Perm.DENY),  # ...but alice not read this
    ])
    assert authorizer.authorize(BOB, HOST, Op.READ, RT.TOPIC, "secret")
    assert not authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "secret")
    assert authorizer.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "secret")
    assert authorizer.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "secret")  # deny READ is READ only
    assert authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "public")
    assert not authorizer.authorize(ALICE, HOST, Op.READ, RT.GROUP, "public")  # another type


async def test_implied_operations(store):
    authorizer = await started(store)
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        await authorizer.create_acls([binding(f"t-{op.name}", op=op)])
        assert authorizer.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, f"t-{op.name}")
    await authorizer.create_acls([binding("c", op=Op.CREATE), binding("ac", op=Op.ALTER_CONFIGS)])
    assert not authorizer.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "c")
    assert authorizer.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, RT.TOPIC, "ac")
    assert not authorizer.authorize(ALICE, HOST, Op.ALTER_CONFIGS, RT.TOPIC, "t-ALTER")
    assert not authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t-WRITE")  # not the other way
    await authorizer.create_acls([binding("all", op=Op.ALL)])
    assert all(authorizer.authorize(ALICE, HOST, op, RT.TOPIC, "all")
               for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.DESCRIBE_CONFIGS))
    # A deny of DESCRIBE is not bypassed by an allowed READ.
    await authorizer.create_acls([binding("all", op=Op.DESCRIBE, perm=Perm.DENY)])
    assert not authorizer.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "all")
    assert authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "all")


async def test_prefixed_patterns_and_hosts(store):
    authorizer = await started(store)
    await authorizer.create_acls([
        binding("orders-", op=Op.WRITE, ptype=PT.PREFIXED),
        binding("orders-eu", op=Op.WRITE, ptype=PT.PREFIXED, perm=Perm.DENY),
        binding("pay", principal=BOB, op=Op.READ, host=HOST),
    ])
    assert authorizer.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders-us")
    assert authorizer.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders-")
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders-eu-1")
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders")
    assert authorizer.authorize(BOB, HOST, Op.READ, RT.TOPIC, "pay")
    assert not authorizer.authorize(BOB, "10.0.0.2", Op.READ, RT.TOPIC, "pay")


async def test_authorize_by_resource_type(store):
    authorizer = await started(store)
    assert not authorizer.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    await authorizer.create_acls([binding("a-", op=Op.WRITE, ptype=PT.PREFIXED)])
    assert authorizer.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not authorizer.authorize_by_resource_type(BOB, HOST, Op.WRITE, RT.TOPIC)
    await authorizer.create_acls([binding("a", op=Op.WRITE, ptype=PT.PREFIXED, perm=Perm.DENY)])
    assert not authorizer.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    await authorizer.create_acls([binding("b", op=Op.WRITE)])
    assert authorizer.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    await authorizer.create_acls([binding("*", op=Op.WRITE, perm=Perm.DENY)])
    assert not authorizer.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)


async def test_acls_stored_in_zookeepers_layout_and_followed_by_other_brokers(store):
    first, second = await started(store), await started(store)
    await first.create_acls([binding("t", op=Op.DESCRIBE_CONFIGS, host=HOST),
                             binding("app-", rtype=RT.GROUP, ptype=PT.PREFIXED)])
    data, _ = await store.get_json("/kafka-acl/Topic/t")
    assert data == {"version": 1, "acls": [{"principal": ALICE, "permissionType": "Allow",
                                            "operation": "DescribeConfigs", "host": HOST}]}
    data, _ = await store.get_json("/kafka-acl-extended/prefixed/Group/app-")
    assert data["acls"][0]["operation"] == "Read"
    literal_changes = await store.get_children("/kafka-acl-changes")
    extended_changes = await store.get_children("/kafka-acl-extended-changes")
    assert [(await store.get(f"/kafka-acl-changes/{c}"))[0]
            for c in literal_changes] == [b"TOPIC:t"]
    extended, _ = await store.get(f"/kafka-acl-extended-changes/{extended_changes[0]}")
    assert json.loads(extended) == {
        "version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}
    await watches_settled()  # the other broker's watch reads the change notifications
    assert second.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert second.authorize(ALICE, HOST, Op.READ, RT.GROUP, "app-1")
    await second.delete_acls([any_filter(resource_type=RT.GROUP)])
    await watches_settled()
    assert not first.authorize(ALICE, HOST, Op.READ, RT.GROUP, "app-1")
    assert await store.exists("/kafka-acl-extended/prefixed/Group/app-") is None
    # A broker starting later loads what is there.
    third = await started(store)
    assert third.acls(any_filter()) == [binding("t", op=Op.DESCRIBE_CONFIGS, host=HOST)]


async def test_acls_survive_a_restart_of_the_store(tmp_path):
    store = EmbeddedMetadataStore(tmp_path / "md")
    await (await started(store)).create_acls([binding("t")])
    store.close()
    again = EmbeddedMetadataStore(tmp_path / "md")
    assert (await started(again)).authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")


async def test_create_refuses_what_kafka_refuses(store):
    authorizer = await started(store)
    results = await authorizer.create_acls([
        binding("t", ptype=PT.MATCH), binding("t", ptype=PT.ANY), binding("t", op=Op.ANY),
        binding("t", perm=Perm.ANY), binding("t", rtype=RT.ANY), binding("", op=Op.READ),
        binding("t", principal="alice"), binding("other", rtype=RT.CLUSTER),
        binding("a/b"), binding("kafka-cluster", rtype=RT.CLUSTER, op=Op.ALTER),
        binding("t"),
    ])
    assert [r.code if r else None for r in results] == [ErrorCode.INVALID_REQUEST] * 9 + [None, None]
    assert "kafka-cluster" in results[7].message
    assert len(authorizer.acls(any_filter())) == 2


async def test_filters_any_and_match(store):
    authorizer = await started(store)
    acls = [binding("orders"), binding("*"), binding("ord", ptype=PT.PREFIXED),
            binding("orders", principal=BOB, op=Op.WRITE), binding("x", rtype=RT.GROUP)]
    await authorizer.create_acls(acls)
    assert set(authorizer.acls(any_filter())) == set(acls)
    assert set(authorizer.acls(any_filter(name="orders"))) == {acls[0], acls[3]}
    assert set(authorizer.acls(any_filter(name="orders", pattern_type=PT.MATCH))) == set(acls[:4])
    assert authorizer.acls(any_filter(name="ord", pattern_type=PT.PREFIXED)) == [acls[2]]
    assert authorizer.acls(any_filter(principal=BOB)) == [acls[3]]
    assert authorizer.acls(any_filter(operation=Op.WRITE, resource_type=RT.TOPIC)) == [acls[3]]
    deleted = await authorizer.delete_acls([any_filter(principal=BOB),
                                            any_filter(resource_type=RT.TOPIC, name="orders")])
    assert deleted == [[acls[3]], [acls[0]]]  # a binding two filters match counts for the first
    assert set(authorizer.acls(any_filter())) == {acls[1], acls[2], acls[4]}
    assert await authorizer.delete_acls([any_filter(name="nothing")]) == [[]]


def test_authorizer_class_name_turns_it_on(store):
    assert AclAuthorizer.from_config(build_config({}, environ={}), store) is None
    on = AclAuthorizer.from_config(build_config({
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"}, environ={}), store)
    assert on is not None and on.super_users == {"User:admin"} and on.allow_everyone_if_no_acl_found
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        AclAuthorizer.from_config(build_config({"authorizer.class.name": "com.example.Mine"},
                                               environ={}), store)


async def test_a_store_that_fails_fails_the_acl_calls_not_the_broker(tmp_path):
    store = EmbeddedMetadataStore(tmp_path / "md")
    authorizer = await started(store)
    await authorizer.create_acls([binding("kept")])
    store.close()  # every write from now on raises MetadataStoreError
    results = await authorizer.create_acls([binding("t"), binding("u")])
    assert [r.code for r in results] == [ErrorCode.UNKNOWN_SERVER_ERROR] * 2
    assert await authorizer.delete_acls([any_filter()]) == [[]]
    assert authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "kept")  # the cache is unchanged
