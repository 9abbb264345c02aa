"""PRODUCER_FENCED for the transactional APIs' older versions: clients that predate it (KIP-588)
get INVALID_PRODUCER_EPOCH, which they handle as the same fencing, as Kafka answers them."""

from __future__ import annotations

from protocol.errors import ErrorCode

# The first version of each API whose clients know PRODUCER_FENCED.
PRODUCER_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2}


def for_version(api_key: int, version: int, error: ErrorCode) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE.get(api_key, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
