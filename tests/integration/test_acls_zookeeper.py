"""ACLs kept in a real ZooKeeper, as a multi-process cluster keeps them: one broker's change is
seen by another's authorizer through the /kafka-acl-changes notifications, and a broker starting
later loads what is there."""

from __future__ import annotations

import asyncio

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
from broker.authorizer.acl_authorizer import AclAuthorizer
from broker.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.harness import until

ALICE = "User:alice"


@pytest.fixture
async def stores(zk_connect):
    opened = [ZooKeeperMetadataStore(zk_connect, session_timeout_ms=4000) for _ in range(3)]
    for store in opened:
        await store.start()
    yield opened
    for store in opened:
        await store.close()


async def test_acl_changes_reach_every_brokers_cache(stores):
    first, second = AclAuthorizer(stores[0]), AclAuthorizer(stores[1])
    await first.start()
    await second.start()
    read = AclBinding(ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED),
                      AccessControlEntry(ALICE, "*", AclOperation.READ, AclPermissionType.ALLOW))
    write = AclBinding(ResourcePattern(ResourceType.TOPIC, "orders-eu", PatternType.LITERAL),
                       AccessControlEntry(ALICE, "*", AclOperation.WRITE, AclPermissionType.ALLOW))
    assert await first.create_acls([read, write]) == [None, None]
    await until(lambda: second.authorize(ALICE, "10.0.0.1", AclOperation.READ, ResourceType.TOPIC,
                                         "orders-us")
                and second.authorize(ALICE, "10.0.0.1", AclOperation.WRITE, ResourceType.TOPIC,
                                     "orders-eu"), steps=2_000_000)
    data, _ = await stores[2].get_json("/kafka-acl-extended/prefixed/Topic/orders-")
    assert data == {"version": 1, "acls": [{"principal": ALICE, "permissionType": "Allow",
                                            "operation": "Read", "host": "*"}]}
    third = AclAuthorizer(stores[2])
    await third.start()
    assert set(third.acls(AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None,
                                           AclOperation.ANY, AclPermissionType.ANY))) == {read, write}
    deleted = await second.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "orders-eu", PatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY)])
    assert set(deleted[0]) == {read, write}  # MATCH: the literal and the prefix that applies
    await until(lambda: not first.acls(AclBindingFilter(
        ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)) and not third.authorize(
            ALICE, "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders-us"), steps=2_000_000)
    for authorizer in (first, second, third):
        authorizer.close()


async def test_a_broker_that_missed_purged_notifications_rereads_everything(stores):
    """Notifications are purged beyond the newest few; a broker whose watch comes after its
    last seen one was purged cannot know what changed, so it reloads every ACL."""
    writer, reader = AclAuthorizer(stores[0]), AclAuthorizer(stores[1])
    writer.acl_store.notifications_kept = 3
    await writer.start()
    await reader.start()
    bindings = [AclBinding(ResourcePattern(ResourceType.GROUP, f"g{i}", PatternType.LITERAL),
                           AccessControlEntry(ALICE, "*", AclOperation.READ,
                                              AclPermissionType.ALLOW)) for i in range(20)]
    # The reader's watch reads only once the writes are done (they await the store: it could
    # otherwise keep up with them), by then its last seen notification is purged.
    writes_done = asyncio.Event()
    read_children = stores[1].get_children

    async def after_the_writes(path, watch=None):
        await writes_done.wait()
        return await read_children(path, watch)

    stores[1].get_children = after_the_writes
    assert await writer.create_acls(bindings) == [None] * 20
    assert len(await stores[2].get_children("/kafka-acl-changes")) == 3
    writes_done.set()
    await until(lambda: all(reader.authorize(ALICE, "10.0.0.1", AclOperation.READ,
                                             ResourceType.GROUP, f"g{i}") for i in range(20)),
                steps=2_000_000)
    writer.close()
    reader.close()
