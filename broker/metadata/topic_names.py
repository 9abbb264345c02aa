"""Topic names: Kafka's rules, checked wherever a name comes in, and the internal topics' names."""

from __future__ import annotations

import re

from protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
OFFSETS_TOPIC = "__consumer_offsets"  # the group coordinator's internal, compacted topic
TRANSACTION_STATE_TOPIC = "__transaction_state"  # the transaction coordinator's, compacted
SHARE_STATE_TOPIC = "__share_group_state"  # the share coordinator's (Kafka 4), compacted
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def is_valid_topic_name(name: str | None) -> bool:
    """Whether `name` could be a topic's: only such names may become store paths or folders."""
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def validate_topic_name(name: str | None) -> None:
    """Kafka's rules: 1-249 characters of [a-zA-Z0-9._-], and not `.` or `..`."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters",
        )
    if not _LEGAL_TOPIC.fullmatch(name):  # not match(): `$` also matches before a final \n
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
        )
