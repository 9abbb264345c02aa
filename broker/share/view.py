"""What `kafka-sim ctl groups` and the console show of a share group's partitions at their
leader: the share-partition start offset, the next offset to acquire, and the records in flight
as ranges of one state and delivery count, with the member holding them and when its
acquisition lock runs out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.share.share_partition import RecordState

if TYPE_CHECKING:
    from broker.share.share_partition import SharePartition
    from broker.share.share_partition_manager import SharePartitionManager


def share_partition_views(manager: SharePartitionManager, leader: int, now_ms: int,
                          group_id: str | None = None) -> list[dict]:
    return [share_partition_view(share, leader, now_ms)
            for (group, _, _), share in sorted(manager.share_partitions.items())
            if group_id in (None, group)]


def share_partition_view(share: SharePartition, leader: int, now_ms: int) -> dict:
    ranges: list[dict] = []
    for offset, record in share.records():
        lock = record.lock if record.state == RecordState.ACQUIRED else None
        entry = lock.timer_task_entry if lock is not None else None
        member = lock.member_id if lock is not None else None
        expires = max(entry.expiration_ms - now_ms, 0) if entry is not None else None
        last = ranges[-1] if ranges else None
        if (last is not None and last["last_offset"] == offset - 1
                and (last["state"], last["delivery_count"], last["member_id"]) == (
                    record.state.name, record.delivery_count, member)):
            last["last_offset"] = offset
            continue
        ranges.append({"first_offset": offset, "last_offset": offset, "state": record.state.name,
                       "delivery_count": record.delivery_count, "member_id": member,
                       "lock_expires_in_ms": expires})
    return {"group": share.group_id, "topic": share.topic, "partition": share.partition,
            "leader": leader, "start_offset": share.start_offset,
            "next_offset": share.next_offset, "in_flight": ranges}
