"""The records of `__consumer_offsets`, as Kafka 3.9 writes them: a key and a value, each an int16
schema version followed by the fields of Kafka's OffsetCommitKey/Value or GroupMetadataKey/Value.

The key's version tells the record type: 0 and 1 are offset commits, 2 is group metadata. A null
value is a tombstone (the offset or group was deleted). Also the consumer protocol's subscription
and assignment (what the coordinator needs to read of the opaque member bytes). No I/O here.
"""

# Wire grammar (non-flexible versions; strings are int16 length + UTF-8, -1 = null; bytes int32):
#
#   OffsetCommitKey v0/v1   => group string, topic string, partition int32
#   OffsetCommitValue v1    => offset int64, metadata string, commitTimestamp int64,
#                              expireTimestamp int64          (written when a retention was asked)
#   OffsetCommitValue v3    => offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
#   GroupMetadataKey v2     => group string
#   GroupMetadataValue v3   => protocolType string, generation int32, protocol nullable string,
#                              leader nullable string, currentStateTimestamp int64,
#                              members [memberId, groupInstanceId nullable, clientId, clientHost,
#                                       rebalanceTimeout int32, sessionTimeout int32,
#                                       subscription bytes, assignment bytes]

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass, field

from construct import Container

from protocol.message_spec import Field
from protocol.schema import build_struct
from protocol.types import Reader

N = (0, 32767)
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3  # v1 only when an explicit expire timestamp is kept
GROUP_VALUE_VERSION = 3

OFFSET_COMMIT_KEY = (
    Field("group", "string", N, default=""),
    Field("topic", "string", N, default=""),
    Field("partition", "int32", N),
)
OFFSET_COMMIT_VALUE = (
    Field("offset", "int64", N),
    Field("leader_epoch", "int32", (3, 32767), default=-1),
    Field("metadata", "string", N, default=""),
    Field("commit_timestamp", "int64", N),
    Field("expire_timestamp", "int64", (1, 1), default=-1),
)
GROUP_METADATA_KEY = (Field("group", "string", N, default=""),)
GROUP_METADATA_VALUE = (
    Field("protocol_type", "string", N, default=""),
    Field("generation", "int32", N),
    Field("protocol", "string", N, nullable=N, default=None),
    Field("leader", "string", N, nullable=N, default=None),
    Field("current_state_timestamp", "int64", (2, 32767), default=-1),
    Field("members", "[]MemberMetadata", N, default=(), fields=(
        Field("member_id", "string", N, default=""),
        Field("group_instance_id", "string", (3, 32767), nullable=(3, 32767), default=None),
        Field("client_id", "string", N, default=""),
        Field("client_host", "string", N, default=""),
        Field("rebalance_timeout", "int32", (1, 32767)),
        Field("session_timeout", "int32", N),
        Field("subscription", "bytes", N, default=b""),
        Field("assignment", "bytes", N, default=b""),
    )),
)
# KIP-848 consumer groups (Kafka 4's group coordinator): the key's version is the record type;
# each value is version 0, flexible (compact strings, tagged fields).
CONSUMER_GROUP_METADATA = 3  # GroupId -> Epoch
CONSUMER_GROUP_MEMBER_METADATA = 5  # GroupId, MemberId -> the member's subscription and client
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6  # GroupId -> AssignmentEpoch
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7  # GroupId, MemberId -> its target partitions
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8  # GroupId, MemberId -> its epoch, state, partitions
CONSUMER_GROUP_RECORDS = frozenset({3, 5, 6, 7, 8})
# KIP-932 share groups (Kafka 4): the same kinds of records under their own key versions
SHARE_GROUP_MEMBER_METADATA = 10  # GroupId, MemberId -> the member's subscription and client
SHARE_GROUP_METADATA = 11  # GroupId -> Epoch
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12  # GroupId -> AssignmentEpoch
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13  # GroupId, MemberId -> its target partitions
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14  # GroupId, MemberId -> its epoch, partitions
SHARE_GROUP_STATE_PARTITION_METADATA = 15  # GroupId -> the partitions it has share state for
SHARE_GROUP_RECORDS = frozenset({10, 11, 12, 13, 14, 15})
# What each record of either family is to its group (a load replays both alike)
GROUP_EPOCH, ASSIGNMENT_EPOCH, MEMBERS, TARGETS, CURRENT, STATE_PARTITIONS = (
    "epoch", "assignment_epoch", "members", "targets", "current", "state_partitions")
GROUP_ROLES = frozenset({GROUP_EPOCH, ASSIGNMENT_EPOCH, STATE_PARTITIONS})  # keyed by group only
RECORD_ROLES = {
    CONSUMER_GROUP_METADATA: GROUP_EPOCH, SHARE_GROUP_METADATA: GROUP_EPOCH,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: ASSIGNMENT_EPOCH,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: ASSIGNMENT_EPOCH,
    CONSUMER_GROUP_MEMBER_METADATA: MEMBERS, SHARE_GROUP_MEMBER_METADATA: MEMBERS,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: TARGETS, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: TARGETS,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: CURRENT,
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: CURRENT,
    SHARE_GROUP_STATE_PARTITION_METADATA: STATE_PARTITIONS,
}
TOPIC_PARTITIONS = (
    Field("topic_id", "uuid", N, default=b"\0" * 16),
    Field("partitions", "[]int32", N, default=()),
)
CONSUMER_GROUP_KEY = (Field("group_id", "string", N, default=""),)
CONSUMER_GROUP_MEMBER_KEY = (Field("group_id", "string", N, default=""),
                             Field("member_id", "string", N, default=""))
CONSUMER_GROUP_VALUES = {
    CONSUMER_GROUP_METADATA: (Field("epoch", "int32", N),),
    CONSUMER_GROUP_MEMBER_METADATA: (
        Field("instance_id", "string", N, nullable=N, default=None),
        Field("rack_id", "string", N, nullable=N, default=None),
        Field("client_id", "string", N, default=""),
        Field("client_host", "string", N, default=""),
        Field("subscribed_topic_names", "[]string", N, default=()),
        Field("subscribed_topic_regex", "string", N, nullable=N, default=None),
        Field("rebalance_timeout_ms", "int32", N, default=-1),
        Field("server_assignor", "string", N, nullable=N, default=None),
        # A member that speaks the classic protocol in a consumer group (KIP-848's migration)
        Field("classic_member_metadata", "ClassicMemberMetadata", N, nullable=N, tag=0,
              tagged=N, default=None, fields=(
                  Field("session_timeout_ms", "int32", N),
                  Field("supported_protocols", "[]ClassicProtocol", N, default=(), fields=(
                      Field("name", "string", N, default=""),
                      Field("metadata", "bytes", N, default=b""),
                  )),
              )),
    ),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (Field("assignment_epoch", "int32", N),),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (
        Field("topic_partitions", "[]TopicPartition", N, default=(), fields=TOPIC_PARTITIONS),),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (
        Field("member_epoch", "int32", N),
        Field("previous_member_epoch", "int32", N),
        Field("state", "int8", N),
        Field("assigned_partitions", "[]TopicPartitions", N, default=(), fields=TOPIC_PARTITIONS),
        Field("partitions_pending_revocation", "[]TopicPartitions", N, default=(),
              fields=TOPIC_PARTITIONS),
    ),
    SHARE_GROUP_MEMBER_METADATA: (
        Field("rack_id", "string", N, nullable=N, default=None),
        Field("client_id", "string", N, default=""),
        Field("client_host", "string", N, default=""),
        Field("subscribed_topic_names", "[]string", N, default=()),
    ),
    SHARE_GROUP_METADATA: (Field("epoch", "int32", N), Field("metadata_hash", "int64", N)),
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: (Field("assignment_epoch", "int32", N),),
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: (
        Field("topic_partitions", "[]TopicPartition", N, default=(), fields=TOPIC_PARTITIONS),),
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: (
        Field("member_epoch", "int32", N),
        Field("previous_member_epoch", "int32", N),
        Field("state", "int8", N),
        Field("assigned_partitions", "[]TopicPartitions", N, default=(), fields=TOPIC_PARTITIONS),
    ),
    SHARE_GROUP_STATE_PARTITION_METADATA: (
        Field("initialized_topics", "[]TopicPartitionsInfo", N, default=(), fields=(
            Field("topic_id", "uuid", N, default=b"\0" * 16),
            Field("topic_name", "string", N, default=""),
            Field("partitions", "[]int32", N, default=()),
        )),
        Field("deleting_topics", "[]TopicInfo", N, default=(), fields=(
            Field("topic_id", "uuid", N, default=b"\0" * 16),
            Field("topic_name", "string", N, default=""),
        )),
    ),
}
_SCHEMAS = {"offset_key": OFFSET_COMMIT_KEY, "offset_value": OFFSET_COMMIT_VALUE,
            "group_key": GROUP_METADATA_KEY, "group_value": GROUP_METADATA_VALUE,
            "consumer_group_key": CONSUMER_GROUP_KEY,
            "consumer_group_member_key": CONSUMER_GROUP_MEMBER_KEY,
            **{f"consumer_group_value_{kind}": fields
               for kind, fields in CONSUMER_GROUP_VALUES.items()}}
_I16 = struct.Struct(">h")


@functools.cache
def _struct(schema: str, version: int):
    flexible = version >= 4 if schema.startswith(("offset", "group")) else \
        schema.startswith("consumer_group_value")
    return build_struct(_SCHEMAS[schema], version, flexible).compile()


def _encode(schema: str, version: int, body: dict) -> bytes:
    out = io.BytesIO()
    out.write(_I16.pack(version))
    _struct(schema, version).buildfunc(body, out, None)
    return out.getvalue()


def _decode(schema: str, data: bytes, version: int) -> Container:
    return _struct(schema, version).parsefunc(Reader(data, 2), None)


@dataclass(slots=True)
class OffsetCommitRecord:
    group: str
    topic: str
    partition: int
    value: Container | None  # offset, leader_epoch, metadata, commit_timestamp, expire_timestamp


@dataclass(slots=True)
class GroupMetadataRecord:
    group: str
    value: Container | None


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _encode("offset_key", OFFSET_COMMIT_KEY_VERSION,
                   {"group": group, "topic": topic, "partition": partition})


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                        expire_timestamp: int = -1) -> bytes:
    version = 1 if expire_timestamp >= 0 else OFFSET_VALUE_VERSION
    return _encode("offset_value", version, {
        "offset": offset, "leader_epoch": leader_epoch, "metadata": metadata or "",
        "commit_timestamp": commit_timestamp, "expire_timestamp": expire_timestamp})


def group_metadata_key(group: str) -> bytes:
    return _encode("group_key", GROUP_METADATA_KEY_VERSION, {"group": group})


def group_metadata_value(body: dict) -> bytes:
    return _encode("group_value", GROUP_VALUE_VERSION, body)


@dataclass(slots=True)
class ConsumerGroupRecord:
    """A KIP-848 or share group's record: `kind` is the key version (CONSUMER_GROUP_*,
    SHARE_GROUP_*), `member_id` None for the group's own records, `value` None for a
    tombstone."""
    kind: int
    group: str
    member_id: str | None
    value: Container | None


def consumer_group_key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    if member_id is None:
        return _encode("consumer_group_key", kind, {"group_id": group_id})
    return _encode("consumer_group_member_key", kind,
                   {"group_id": group_id, "member_id": member_id})


def consumer_group_value(kind: int, body: dict) -> bytes:
    return _encode(f"consumer_group_value_{kind}", 0, body)


def decode_record(key: bytes, value: bytes | None
                  ) -> OffsetCommitRecord | GroupMetadataRecord | ConsumerGroupRecord | None:
    """One `__consumer_offsets` record; None for a key version this broker does not know."""
    (key_version,) = _I16.unpack_from(key)
    if key_version in RECORD_ROLES:
        member = RECORD_ROLES[key_version] not in GROUP_ROLES
        k = _decode("consumer_group_member_key" if member else "consumer_group_key", key, 0)
        v = None if value is None else _decode(f"consumer_group_value_{key_version}", value, 0)
        return ConsumerGroupRecord(key_version, k.group_id, k.member_id if member else None, v)
    if key_version in (0, 1):
        k = _decode("offset_key", key, 0)
        v = None if value is None else _decode("offset_value", value, _I16.unpack_from(value)[0])
        return OffsetCommitRecord(k.group, k.topic, k.partition, v)
    if key_version == GROUP_METADATA_KEY_VERSION:
        k = _decode("group_key", key, 0)
        v = None if value is None else _decode("group_value", value, _I16.unpack_from(value)[0])
        return GroupMetadataRecord(k.group, v)
    return None


# --- the consumer protocol (protocol type "consumer"): subscription and assignment -------------

@dataclass(slots=True)
class ConsumerAssignment:
    partitions: dict[str, list[int]] = field(default_factory=dict)
    user_data: bytes | None = None


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = _I16.unpack_from(buf, pos)
    pos += 2
    return buf[pos : pos + length].decode(), pos + length


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a consumer protocol subscription (any version: topics come first); None if
    the bytes are not one."""
    try:
        pos = 2  # version
        (count,) = struct.unpack_from(">i", subscription, pos)
        pos += 4
        topics = set()
        for _ in range(max(count, 0)):
            topic, pos = _read_string(subscription, pos)
            topics.add(topic)
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


@dataclass(slots=True)
class ConsumerSubscription:
    """A consumer protocol subscription: its version, topics, and (v1+) the partitions the
    member owns, (v3+) its rack."""
    version: int
    topics: list[str]
    owned: dict[str, set[int]] = field(default_factory=dict)
    rack_id: str | None = None


def decode_subscription(subscription: bytes) -> ConsumerSubscription | None:
    """A consumer protocol subscription of any version (None if the bytes are not one): version,
    [topic], user data; v1+ [owned topic, [partition]]; v2+ generation; v3+ rack id."""
    try:
        (version,) = _I16.unpack_from(subscription, 0)
        pos = 2
        (count,) = struct.unpack_from(">i", subscription, pos)
        pos += 4
        topics = []
        for _ in range(count):
            topic, pos = _read_string(subscription, pos)
            topics.append(topic)
        (user_data,) = struct.unpack_from(">i", subscription, pos)
        pos += 4 + max(user_data, 0)
        out = ConsumerSubscription(version, topics)
        if version >= 1:
            (count,) = struct.unpack_from(">i", subscription, pos)
            pos += 4
            for _ in range(count):
                topic, pos = _read_string(subscription, pos)
                (n,) = struct.unpack_from(">i", subscription, pos)
                pos += 4
                out.owned.setdefault(topic, set()).update(
                    struct.unpack_from(f">{n}i", subscription, pos))
                pos += 4 * n
        if version >= 3:
            pos += 4  # generation id
            (length,) = _I16.unpack_from(subscription, pos)
            if length >= 0:
                out.rack_id, pos = _read_string(subscription, pos)
        return out
    except (struct.error, UnicodeDecodeError, ValueError):
        return None


def decode_assignment(assignment: bytes) -> ConsumerAssignment | None:
    """A consumer protocol assignment: version, [topic, [partition]], user data."""
    if not assignment:
        return ConsumerAssignment()
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", assignment, pos)
        pos += 4
        out = ConsumerAssignment()
        for _ in range(max(count, 0)):
            topic, pos = _read_string(assignment, pos)
            (n,) = struct.unpack_from(">i", assignment, pos)
            pos += 4
            out.partitions[topic] = list(struct.unpack_from(f">{max(n, 0)}i", assignment, pos))
            pos += 4 * max(n, 0)
        return out
    except (struct.error, UnicodeDecodeError):
        return None


def encode_consumer_protocol(topics: dict[str, list[int]] | list[str], version: int = 0) -> bytes:
    """Subscription (a list of topics) or assignment (topic -> partitions), user data null; for
    tests and tools."""
    out = [_I16.pack(version), struct.pack(">i", len(topics))]
    for topic in topics:
        raw = topic.encode()
        out += [_I16.pack(len(raw)), raw]
        if isinstance(topics, dict):
            out.append(struct.pack(f">i{len(topics[topic])}i", len(topics[topic]), *topics[topic]))
    out.append(struct.pack(">i", -1))  # user data: null
    return b"".join(out)
