"""Manual replica assignments, validated as Kafka's AdminZkClient does (INVALID_REPLICA_ASSIGNMENT)."""

from __future__ import annotations

import pytest

from broker.admin.admin_manager import validate_new_partitions_assignment, validate_topic_assignment
from protocol.errors import ErrorCode, KafkaError

LIVE = [0, 1, 2]


@pytest.mark.parametrize(("assignment", "message"), [
    ({0: [0], 1: []}, "The manual partition assignment includes an empty replica list."),
    ({0: [0, 1], 1: [2]}, "All partitions should have the same number of replicas"),
    ({0: [1, 1]}, "Duplicate replica assignment found: {0: [1, 1]}"),
    ({-5: [0]}, "partitions should be a consecutive 0-based integer sequence"),
    ({1: [0], 2: [1]}, "partitions should be a consecutive 0-based integer sequence"),
    ({0: [0, 9]}, "The manual partition assignment includes broker 9, but no such broker is "
                  "registered."),
])
def test_bad_topic_assignments(assignment, message) -> None:
    with pytest.raises(KafkaError) as info:
        validate_topic_assignment(assignment, LIVE)
    assert (info.value.code, info.value.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def test_good_topic_assignment() -> None:
    validate_topic_assignment({1: [2, 0], 0: [0, 1]}, LIVE)


@pytest.mark.parametrize(("assignment", "message"), [
    ({3: []}, "Cannot have replication factor of 0 for partition id 3."),
    ({3: [0, 0]}, "Duplicate brokers not allowed in replica assignment: 0, 0 for partition id 3."),
    ({3: [0, 5]}, "Some brokers specified for partition id 3 are not available. Specified brokers: "
                  "0, 5, available brokers: 0, 1, 2."),
    ({3: [0, 1], 4: [2], 5: [0, 1, 2]}, "Inconsistent replication factor between partitions, "
     "partition 0 has 2 while partitions [4, 5] have replication factors [1, 3], respectively."),
])
def test_bad_new_partition_assignments(assignment, message) -> None:
    with pytest.raises(KafkaError) as info:
        validate_new_partitions_assignment(assignment, 2, LIVE)
    assert (info.value.code, info.value.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
