"""A partition's state as the controller decides it and every broker learns it: leader, leader
epoch, ISR and replicas, with the version of its state node (`/brokers/topics/T/partitions/N/state`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class LeaderAndIsr:
    """A partition's state as the controller decides it (LeaderAndIsr / UpdateMetadata)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_version: int = 0  # the state node's version: ISR updates are conditional on it
    controller_epoch: int = 0
