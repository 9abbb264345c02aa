"""ReplicaAssignment: how KIP-455 computes RS, AR and RR, on the examples of Kafka's controller
documentation (a move, a move replacing an unfinished one, a cancellation)."""

from __future__ import annotations

from broker.metadata.replica_assignment import ReplicaAssignment


def test_a_move_lists_the_target_first_then_the_origin():
    moving = ReplicaAssignment([1, 2, 3]).reassign_to([4, 5, 6])
    assert moving == ReplicaAssignment([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    assert moving.is_being_reassigned
    assert moving.origin_replicas == [1, 2, 3] and moving.target_replicas == [4, 5, 6]


def test_overlapping_replicas_are_neither_added_nor_removed():
    moving = ReplicaAssignment([1, 2, 3]).reassign_to([3, 4, 2])
    assert moving == ReplicaAssignment([3, 4, 2, 1], [4], [1])


def test_a_new_target_replaces_an_unfinished_move_from_the_same_origin():
    moving = ReplicaAssignment([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    assert moving.reassign_to([1, 7]) == ReplicaAssignment([1, 7, 2, 3], [7], [2, 3])


def test_cancelling_returns_to_the_origin_without_its_order():
    moving = ReplicaAssignment([0, 1]).reassign_to([1, 2])
    assert moving == ReplicaAssignment([1, 2, 0], [2], [0])
    back = moving.reassign_to(moving.origin_replicas)
    assert back == ReplicaAssignment([1, 0]) and not back.is_being_reassigned


def test_a_reordering_is_no_move():
    assert not ReplicaAssignment([0, 1]).reassign_to([1, 0]).is_being_reassigned
