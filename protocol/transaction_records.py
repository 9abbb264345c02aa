"""Transaction records as Kafka 4 writes them: the `__transaction_state` key and value, and the
control records (commit/abort markers) a partition leader appends to end a transaction. No I/O.
"""

# Wire grammar (each key and value starts with its int16 schema version):
#
#   TransactionLogKey v0    => transactionalId string
#   TransactionLogValue v0  => producerId int64, producerEpoch int16, transactionTimeoutMs int32,
#                              transactionStatus int8,
#                              transactionPartitions nullable [topic string, partitionIds [int32]],
#                              transactionLastUpdateTimestampMs int64,
#                              transactionStartTimestampMs int64
#   TransactionLogValue v1  => the same fields, flexible (compact strings/arrays), and tagged:
#                              0 previousProducerId int64, 1 nextProducerId int64,
#                              2 clientTransactionVersion int16
#   ControlRecordKey v0     => version int16, type int16 (0 = abort, 1 = commit)
#   EndTxnMarker v0         => version int16, coordinatorEpoch int32
#
# Both versions are read. Version 0 is written until transaction.version 1 is finalized (as Kafka:
# every Kafka since 0.11 reads it), version 1 from then on.

from __future__ import annotations

import enum
import functools
import io
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError
from protocol.message_spec import Field
from protocol.records import CREATE_TIME, encode_batch
from protocol.schema import build_struct
from protocol.types import Reader

N = (0, 32767)
KEY_VERSION = 0
_I16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")

TRANSACTION_LOG_KEY = (Field("transactional_id", "string", N, default=""),)
TRANSACTION_LOG_VALUE = (
    Field("producer_id", "int64", N),
    Field("producer_epoch", "int16", N),
    Field("transaction_timeout_ms", "int32", N),
    Field("transaction_status", "int8", N),
    Field("transaction_partitions", "[]PartitionsSchema", N, nullable=N, default=None, fields=(
        Field("topic", "string", N, default=""),
        Field("partition_ids", "[]int32", N, default=()),
    )),
    Field("transaction_last_update_timestamp_ms", "int64", N),
    Field("transaction_start_timestamp_ms", "int64", N),
    Field("previous_producer_id", "int64", (1, 32767), tag=0, tagged=(1, 32767), default=-1),
    Field("next_producer_id", "int64", (1, 32767), tag=1, tagged=(1, 32767), default=-1),
    Field("client_transaction_version", "int16", (1, 32767), tag=2, tagged=(1, 32767)),
)
_SCHEMAS = {"key": TRANSACTION_LOG_KEY, "value": TRANSACTION_LOG_VALUE}


class TransactionState(enum.IntEnum):
    """A transactional id's state; the numbers are what `transaction_status` holds on disk."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions and ListTransactions answer with."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(slots=True)
class TransactionLogValue:
    """A transactional id's state as `__transaction_state` keeps it."""
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: dict[str, list[int]]  # topic -> partition ids, empty when none
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1  # the producer id before the last transition
    next_producer_id: int = -1  # transactions v2: the id a transaction that ran out of epochs ends with
    client_transaction_version: int = 0  # 2: the transaction is a transactions v2 one


@functools.cache
def _struct(schema: str, version: int):
    return build_struct(_SCHEMAS[schema], version, version >= 1).compile()


def _encode(schema: str, version: int, body: dict) -> bytes:
    out = io.BytesIO()
    out.write(_I16.pack(version))
    _struct(schema, version).buildfunc(body, out, None)
    return out.getvalue()


def _corrupt(what: str, exc: Exception) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unreadable transaction log {what}: {exc!r}")


def _version(data: bytes, what: str, known: Iterable[int]) -> int:
    if len(data) < 2:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"transaction log {what} shorter than 2 bytes")
    (version,) = _I16.unpack_from(data)
    if version not in known:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"unknown transaction log {what} version {version}")
    return version


def transaction_log_key(transactional_id: str) -> bytes:
    return _encode("key", KEY_VERSION, {"transactional_id": transactional_id})


def transaction_log_value(value: TransactionLogValue, version: int = 0) -> bytes:
    """A value as Kafka writes it: no partition list (null) in state Empty; version 1 (flexible,
    with the tagged fields) once transaction.version is 1 or more."""
    if value.state == TransactionState.EMPTY and value.partitions:
        raise ValueError("a transaction in state Empty has no partitions")
    partitions = None if value.state == TransactionState.EMPTY else [
        {"topic": topic, "partition_ids": sorted(ids)} for topic, ids in sorted(value.partitions.items())]
    return _encode("value", version, {
        "producer_id": value.producer_id, "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.transaction_timeout_ms,
        "transaction_status": int(value.state), "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.start_timestamp_ms,
        "previous_producer_id": value.previous_producer_id,
        "next_producer_id": value.next_producer_id,
        "client_transaction_version": value.client_transaction_version})


def read_transaction_log_key(key: bytes) -> str:
    _version(key, "key", (0,))
    try:
        return _struct("key", 0).parsefunc(Reader(key, 2), None).transactional_id
    except Exception as exc:  # construct and struct errors alike: the bytes are not a key
        raise _corrupt("key", exc) from exc


def read_transaction_log_value(value: bytes | None) -> TransactionLogValue | None:
    """The value of a `__transaction_state` record; None for a tombstone (the id expired)."""
    if value is None:
        return None
    version = _version(value, "value", (0, 1))
    try:
        v = _struct("value", version).parsefunc(Reader(value, 2), None)
        state = TransactionState(v.transaction_status)
    except Exception as exc:
        raise _corrupt("value", exc) from exc
    partitions: dict[str, list[int]] = {}
    for entry in v.transaction_partitions or ():
        partitions.setdefault(entry.topic, []).extend(entry.partition_ids)
    return TransactionLogValue(
        v.producer_id, v.producer_epoch, v.transaction_timeout_ms, state, partitions,
        v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms,
        v.get("previous_producer_id", -1), v.get("next_producer_id", -1),
        v.get("client_transaction_version", 0))


# --- control records ----------------------------------------------------------------------------

def control_record_key(control_type: ControlType) -> bytes:
    return _CONTROL_KEY.pack(0, int(control_type))


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _MARKER.pack(0, coordinator_epoch)


def read_control_type(key: bytes | None) -> ControlType | None:
    """What a control record marks; None for a control record this broker does not know (Kafka
    skips those too: later versions may add types)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version != 0 or control_type not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    return ControlType(control_type)


def read_coordinator_epoch(value: bytes | None) -> int:
    if value is None or len(value) < _MARKER.size:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "end transaction marker shorter than 6 bytes")
    return _MARKER.unpack_from(value)[1]


def marker_batch(producer_id: int, producer_epoch: int, control_type: ControlType,
                 coordinator_epoch: int, timestamp: int | None = None) -> bytes:
    """The one-record control batch that ends a producer's transaction on a partition (offsets and
    leader epoch are assigned by the leader on append, as for any batch)."""
    record = (control_record_key(control_type), end_txn_marker_value(coordinator_epoch), (),
              timestamp)
    return encode_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                        is_transactional=True, is_control=True, timestamp_type=CREATE_TIME)


def partitions_by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        out.setdefault(topic, []).append(partition)
    return out


def topic_partitions(by_topic: Mapping[str, Iterable[int]]) -> set[tuple[str, int]]:
    return {(topic, p) for topic, ids in by_topic.items() for p in ids}
