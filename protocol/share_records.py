"""The records of `__share_group_state`, as Kafka 4's share coordinator writes them: a key and a
value, each an int16 schema version followed by the fields of Kafka's ShareSnapshotKey/Value
(flexible: compact strings, tagged fields). Each record is a whole snapshot of one
share-partition's state; the last one for a key wins (the topic is compacted). No I/O here.
"""

# ShareSnapshotKey v0   => groupId string, topicId uuid, partition int32
# ShareSnapshotValue v0 => snapshotEpoch int32, stateEpoch int32, leaderEpoch int32,
#                          startOffset int64,
#                          stateBatches [firstOffset int64, lastOffset int64, deliveryState int8,
#                                        deliveryCount int16]

from __future__ import annotations

import functools
import io
import struct
import uuid
from dataclasses import dataclass

from protocol.message_spec import Field
from protocol.schema import build_struct
from protocol.types import Reader

N = (0, 32767)
SHARE_SNAPSHOT_KEY_VERSION = 0
SHARE_SNAPSHOT_VALUE_VERSION = 0
_KEY = (Field("group_id", "string", N, default=""),
        Field("topic_id", "uuid", N, default=b"\0" * 16),
        Field("partition", "int32", N))
_VALUE = (Field("snapshot_epoch", "int32", N),
          Field("state_epoch", "int32", N),
          Field("leader_epoch", "int32", N),
          Field("start_offset", "int64", N),
          Field("state_batches", "[]StateBatch", N, default=(), fields=(
              Field("first_offset", "int64", N),
              Field("last_offset", "int64", N),
              Field("delivery_state", "int8", N),
              Field("delivery_count", "int16", N))))
_I16 = struct.Struct(">h")


@functools.cache
def _struct(which: str):
    return build_struct(_KEY if which == "key" else _VALUE, 0, which == "value").compile()


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """One share-partition's state: its start offset and the in-flight records as (first, last,
    delivery state, delivery count) batches (Available 0, Acknowledged 2, Archived 4)."""
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[tuple[int, int, int, int], ...] = ()
    snapshot_epoch: int = 0


def share_snapshot_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    out = io.BytesIO()
    out.write(_I16.pack(SHARE_SNAPSHOT_KEY_VERSION))
    _struct("key").buildfunc({"group_id": group_id, "topic_id": topic_id.bytes,
                              "partition": partition}, out, None)
    return out.getvalue()


def share_snapshot_value(snapshot: ShareSnapshot) -> bytes:
    out = io.BytesIO()
    out.write(_I16.pack(SHARE_SNAPSHOT_VALUE_VERSION))
    _struct("value").buildfunc({
        "snapshot_epoch": snapshot.snapshot_epoch, "state_epoch": snapshot.state_epoch,
        "leader_epoch": snapshot.leader_epoch, "start_offset": snapshot.start_offset,
        "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s,
                           "delivery_count": c} for f, la, s, c in snapshot.batches]},
        out, None)
    return out.getvalue()


def decode_share_record(key: bytes, value: bytes | None
                        ) -> tuple[tuple[str, uuid.UUID, int], ShareSnapshot | None] | None:
    """((group, topic id, partition), snapshot or None for a tombstone); None for a key this
    broker does not know (Kafka's ShareUpdate records are not written here)."""
    if _I16.unpack_from(key)[0] != SHARE_SNAPSHOT_KEY_VERSION:
        return None
    k = _struct("key").parsefunc(Reader(key, 2), None)
    ident = (k.group_id, uuid.UUID(bytes=bytes(k.topic_id)), k.partition)
    if value is None:
        return ident, None
    v = _struct("value").parsefunc(Reader(value, 2), None)
    return ident, ShareSnapshot(v.state_epoch, v.leader_epoch, v.start_offset, tuple(
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in v.state_batches), v.snapshot_epoch)
